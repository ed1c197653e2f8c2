// Package clustertest reads the compact cluster text of berth's scenario
// tests (policies' testdata and plan's) into the snapshot a driver would
// observe: nodes, allocations and ends, one a line.
//
//	node NAME [gpus=N] [domains=D] [numa=U] [model=M] [also=M2:K] [mig=PROFILE:K [migparents=P]] [notready] [ineligible]
//	     [status=down|disconnected|initializing] [draining] [deadline=+5s]
//	     [unhealthy=I,J] [held=I:JOB,…] [cpu=CORES|500m] [mem=SIZE] [disk=SIZE] [cores=N]
//	     [dc=DC] [pool=P] [class=C] [meta=k:v,k2:v2] [drivers=a,b] [volumes=a,b]
//	alloc PROJECT/NAME node=N gpus=I,J [replica=R] [phase=running|starting|stopping]
//	      [started=-1h] [checkpoint=-5m] [cpu=CORES] [mem=SIZE] [disk=SIZE] [cores=N]
//	      [use=P,Q [useAt=-1m]] [spec=HASH]
//	exit PROJECT/NAME class=completed|task-failed|node-fault [node=N]
//
// also=M2:K: after its N whole GPUs the node has K whole GPUs of model M2
// (a device group of its own; the topology's domains and NUMA nodes
// count the first N only). mig=PROFILE:K: after those, K MIG instances
// of model "M MIG PROFILE", as the NVIDIA device plugin names them, in
// one domain (as the Nomad driver sees them without berth agent's MIG
// lists); migparents=P splits them evenly over P parent GPUs, parent p
// a Domain of its own past the node's D NVLink domains, D+p (the Nomad
// driver too gives each parent a Domain past the NVLink domains), and
// NUMA node p·U/P. held=I:JOB: GPU I is held by JOB, a job berth does not own
// (not healthy to berth). A node has 8 H100 GPUs unless it says otherwise, split evenly into its
// NVLink domains and NUMA nodes; an allocation started an hour before
// now unless it says when. use=P,Q is its last GPU utilization reading,
// each GPU's percent, read now unless useAt says when; spec=HASH the
// fingerprint of the spec it runs. Times are relative to now. Lines starting
// with # are comments.
//
// The GPUs of a node are named g0…gN-1 (policies' scenarios), or, with
// Options.NodeGPUIDs, NODE-g0…NODE-gN-1 (plan's, whose reports show the
// IDs); allocations name their GPUs by index either way.
//
// The same compact line format serves the other sections of the
// scenarios (policies' specs and history), so the pieces Parse is made of
// are exported for their parsers: Lines splits a section into lines,
// leaving out blanks and comments; Fields splits a line into a Line, its
// Words (kind, name, flags), KV (key=value) and Flags; a Line's Int,
// CPU, Size, List, Resources and Placement read its values; Rel reads a
// time relative to now and ParseRef a PROJECT/NAME.
//
// It is a test helper: only tests import it.
package clustertest

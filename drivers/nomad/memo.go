package nomad

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/nomad/api"
)

// What a process that starts cold (berth apply) may take from the one
// before it instead of reading every job of the fleet again.
//
// Observe needs, of each version of a job berth's allocations run, its
// meta, priority and stop flag, its task groups' names and meta, and its
// jobHash (drift). A loop keeps them in its cache; a cold process would
// read them whole, a request per node (10,000 jobs decoded with their
// allocations: seconds at fleet size). A version memo keeps for the next
// process what the job list does not say (the version number, the task
// groups, the hash), for the versions that are their job's current one,
// with what names a version's content: namespace, ID, create index,
// job modify index (the Raft index of the write that made it) and submit
// time (when it was submitted, to the nanosecond). A full read takes a
// version from the memo only when the job's list stub (which does not
// carry the version number) says the same five: the job's current
// version, written at the same index at the same instant, is the version
// the memo read, and the memo says its number. Older versions (an update
// under way, the allocations a job stopped since ran) are read as before.

// memoFormat is the version of the memo's encoding; another reads as none.
const memoFormat = 2

type versionMemo struct {
	Format   int           `json:"format"`
	Versions []memoVersion `json:"versions"`
}

// memoVersion is what Observe reads of one job version beyond what the
// job's list stub says of it (meta, priority, stop: the stub's are the
// version's when it names the version).
type memoVersion struct {
	Namespace      string      `json:"namespace"`
	ID             string      `json:"id"`
	CreateIndex    uint64      `json:"createIndex"`
	Version        uint64      `json:"version"`
	JobModifyIndex uint64      `json:"jobModifyIndex"`
	SubmitTime     int64       `json:"submitTime"`
	Groups         []memoGroup `json:"groups,omitempty"`
	// Hash is the whole version's jobHash.
	Hash string `json:"hash"`
}

type memoGroup struct {
	Name string            `json:"name"`
	Meta map[string]string `json:"meta,omitempty"`
}

// names reports whether stub lists the version m is.
func (m memoVersion) names(stub *api.JobListStub) bool {
	return stub.Namespace == m.Namespace && stub.ID == m.ID && stub.CreateIndex == m.CreateIndex &&
		stub.JobModifyIndex == m.JobModifyIndex && stub.SubmitTime == m.SubmitTime
}

// job is the version as Observe reads it, with what stub, which names
// it, says of it.
func (m memoVersion) job(stub *api.JobListStub) *api.Job {
	priority, stop := stub.Priority, stub.Stop
	j := &api.Job{
		ID: &m.ID, Namespace: &m.Namespace, CreateIndex: &m.CreateIndex, Version: &m.Version,
		JobModifyIndex: &m.JobModifyIndex, SubmitTime: &m.SubmitTime, Priority: &priority, Stop: &stop, Meta: stub.Meta,
	}
	for _, g := range m.Groups {
		j.TaskGroups = append(j.TaskGroups, &api.TaskGroup{Name: &g.Name, Meta: g.Meta})
	}
	return j
}

// memoOf is j's memo entry with hash, and whether j says what names it.
func memoOf(j *api.Job, hash string) (memoVersion, bool) {
	if j.Namespace == nil || j.ID == nil || j.CreateIndex == nil || j.Version == nil || j.JobModifyIndex == nil || j.SubmitTime == nil {
		return memoVersion{}, false
	}
	m := memoVersion{
		Namespace: *j.Namespace, ID: *j.ID, CreateIndex: *j.CreateIndex, Version: *j.Version,
		JobModifyIndex: *j.JobModifyIndex, SubmitTime: *j.SubmitTime, Hash: hash,
	}
	for _, tg := range j.TaskGroups {
		m.Groups = append(m.Groups, memoGroup{Name: deref(tg.Name), Meta: tg.Meta})
	}
	return m, true
}

// SaveVersions writes, for RestoreVersions in the next process, what the
// last Observe read of the versions berth's allocations run that are
// their job's current one. It writes nothing when the driver has not read
// the cluster (unreachable): the memo before it stays good.
func (d *Driver) SaveVersions(w io.Writer) error {
	d.mu.Lock()
	hashes := maps.Clone(d.jobHashes)
	d.mu.Unlock()
	c := d.cache
	c.mu.Lock()
	if c.fullReads == 0 {
		c.mu.Unlock()
		return nil
	}
	var out versionMemo
	for j, h := range hashes {
		m, ok := memoOf(j, h)
		if !ok {
			continue
		}
		if stub := c.jobs[jobKey{m.Namespace, m.ID}]; stub != nil && m.names(stub) {
			out.Versions = append(out.Versions, m)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out.Versions, func(a, b memoVersion) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	out.Format = memoFormat
	return json.NewEncoder(w).Encode(out)
}

// RestoreVersions gives the driver, before its first Observe, the memo
// SaveVersions wrote. An empty memo, or one of another format, is none.
func (d *Driver) RestoreVersions(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var in versionMemo
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("nomad: job version memo: %w", err)
	}
	if in.Format != memoFormat {
		return nil
	}
	memo := make(map[jobKey]memoVersion, len(in.Versions))
	for _, m := range in.Versions {
		memo[jobKey{m.Namespace, m.ID}] = m
	}
	d.mu.Lock()
	d.memo = memo
	d.mu.Unlock()
	return nil
}

// fromMemo returns the versions of the jobs just listed that the memo
// holds and the listing names, and notes their hashes for the next
// Observe: a full read does not read them. The memo is used once (the
// loop's cache follows from there).
func (d *Driver) fromMemo(jobs []*api.JobListStub) map[versionKey]*api.Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	memo := d.memo
	d.memo = nil
	if len(memo) == 0 {
		return nil
	}
	if d.jobHashes == nil {
		d.jobHashes = map[*api.Job]string{}
	}
	out := map[versionKey]*api.Job{}
	for _, stub := range jobs {
		m, ok := memo[jobKey{stub.Namespace, stub.ID}]
		if !ok || !m.names(stub) {
			continue
		}
		j := m.job(stub)
		out[versionKey{m.Namespace, m.ID, m.Version}] = j
		d.jobHashes[j] = m.Hash
	}
	return out
}

package nomad

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestCacheSkipsWhatTheReadHolds: a stream opened from an earlier index
// (or 0, which Nomad answers with its whole event buffer) replays events
// the full read already holds. They are not applied again: an allocation
// Nomad has since collected does not come back, and the purge of a job
// registered again since does not remove it.
func TestCacheSkipsWhatTheReadHolds(t *testing.T) {
	c := newClusterCache()
	c.live, c.from, c.index = true, 11, 20 // a read at indexes 10–20
	c.nodes, c.allocs = map[string]*api.Node{}, map[string]*cachedAlloc{}
	c.jobs = map[jobKey]*api.JobListStub{{"vision", "a"}: {ID: "a", Namespace: "vision", ModifyIndex: 15}}
	payload := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id, ns := "a", "vision"
	c.applyLocked(streamBatch{Index: 5, Events: []streamEvent{{Topic: api.TopicAllocation, Type: "AllocationUpdated", Index: 5,
		Payload: payload(map[string]any{"Allocation": &api.Allocation{ID: "collected", Namespace: ns, JobID: id, ClientStatus: "complete", ModifyIndex: 5}})}}})
	if _, ok := c.allocs["collected"]; ok {
		t.Error("an allocation from before the read (collected since) came back into the cache")
	}
	c.applyLocked(streamBatch{Index: 12, Events: []streamEvent{{Topic: api.TopicJob, Type: "JobDeregistered", Index: 12,
		Payload: payload(map[string]any{"Job": &api.Job{ID: &id, Namespace: &ns}, "Deleted": true})}}})
	if c.jobs[jobKey{ns, id}] == nil {
		t.Error("the purge of job vision/a at index 12 removed it, registered again at 15")
	}
	c.applyLocked(streamBatch{Index: 21, Events: []streamEvent{{Topic: api.TopicJob, Type: "JobDeregistered", Index: 21,
		Payload: payload(map[string]any{"Job": &api.Job{ID: &id, Namespace: &ns}, "Deleted": true})}}})
	if c.jobs[jobKey{ns, id}] != nil {
		t.Error("the purge of job vision/a at index 21, after the read, did not remove it")
	}
}

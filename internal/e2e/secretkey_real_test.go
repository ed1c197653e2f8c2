package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// TestRealSecretMissingKeyFails: a secret naming a key its Variable does
// not have is the spec's mistake, not the node's: the workspace is
// Failed at once with a reason that names the path and the key, and is
// not started again and again on other nodes.
func TestRealSecretMissingKeyFails(t *testing.T) {
	var log logBuffer
	r := newLoggedLoop(t, &log)
	r.write("tiers.yaml", realTiers)
	putVar(t, r.c, "berth-real", "nomad/jobs/nokey", api.VariableItems{"token": "x"})
	r.write("nokey.yaml", secretWorkspace("berth-real", "nokey", "true", "{variable: nomad/jobs/nokey, key: tokn, env: HF_TOKEN}"))
	r.until(30*time.Second, "nokey fails", func() bool {
		st := r.state("nokey")
		if st.ReasonKind == "moving" {
			t.Fatalf("nokey is %s: %q; a key its Variable lacks is the spec's mistake, not the node's", st.State, st.Reason)
		}
		return st.State == view.StateFailed
	})
	st := r.state("nokey")
	if !strings.Contains(st.Reason, `Nomad Variable nomad/jobs/nokey has no key "tokn"`) || st.LastEnd == nil || st.LastEnd.Class != "task-failed" {
		t.Errorf("nokey is Failed: %q, end %+v; want the task's failure, naming the Variable and the key", st.Reason, st.LastEnd)
	}
	t.Logf("nokey: %s: %s", st.State, st.Reason)
}

package notify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/notify"
	"github.com/berth-dev/berth/schema"
)

// A preemption as a webhook receiver gets it (the README shows this
// document), and as a Slack channel reads it.
func Example() {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := notify.Batch{
		Route: schema.Notification{Meta: schema.Meta{Name: "ml-audit"}},
		Events: []notify.Event{{
			Event: schema.EventPreempted, At: at, Workspace: "ml/train-7b", Project: "ml", Owner: "alice", State: "Preempting",
			Reason: "preempted by prod/serve-llm: tier high (80) outranks tier low (20)",
			Next:   "it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up",
			Node:   "gpu-node-3", PreemptedBy: "prod/serve-llm", GraceSeconds: 300, AtRiskSeconds: 1260, Seq: 41,
		}},
	}
	body, _ := notify.WebhookBody(b, "lab")
	var out bytes.Buffer
	json.Indent(&out, body, "", "  ")
	fmt.Println(out.String())
	fmt.Println(notify.SlackText(b, "lab"))
	// Output:
	// {
	//   "version": "berth.dev/notify/v1",
	//   "notifier": "ml-audit",
	//   "cluster": "lab",
	//   "events": [
	//     {
	//       "event": "preempted",
	//       "at": "2026-03-01T12:00:00Z",
	//       "workspace": "ml/train-7b",
	//       "project": "ml",
	//       "owner": "alice",
	//       "state": "Preempting",
	//       "reason": "preempted by prod/serve-llm: tier high (80) outranks tier low (20)",
	//       "next": "it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up",
	//       "node": "gpu-node-3",
	//       "preemptedBy": "prod/serve-llm",
	//       "graceSeconds": 300,
	//       "atRiskSeconds": 1260,
	//       "seq": 41
	//     }
	//   ]
	// }
	// *berth on lab*
	// • *ml/train-7b* (alice) was preempted by prod/serve-llm on gpu-node-3: preempted by prod/serve-llm: tier high (80) outranks tier low (20). _Next: it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up._
}

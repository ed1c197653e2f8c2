package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

// TestSign: the signature is HMAC-SHA256 over "UNIX.BODY" (a vector
// computed with Python's hmac), and Verify accepts it, and refuses
// another key, a changed body, a stale timestamp and a bad header.
func TestSign(t *testing.T) {
	key, body := []byte("k3y"), []byte(`{"a":1}`)
	at := time.Unix(1700000000, 0)
	want := "t=1700000000,v1=fd5a70e965043f7df6309c2c3b5ff5a8ffa99b1f5175e9a311459e73c4634d4a"
	if got := Sign(key, body, at); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if err := Verify(key, body, want, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for name, tt := range map[string]struct {
		key, body []byte
		header    string
		now       time.Time
		want      string
	}{
		"other key":    {key: []byte("k3z"), body: body, header: want, now: at, want: "does not match"},
		"changed body": {key: key, body: []byte(`{"a":2}`), header: want, now: at, want: "does not match"},
		"stale":        {key: key, body: body, header: want, now: at.Add(6 * time.Minute), want: "6m0s away from now"},
		"no t":         {key: key, body: body, header: "v1=00", now: at, want: "not t=UNIX,v1=HEX"},
	} {
		err := Verify(tt.key, tt.body, tt.header, tt.now, 5*time.Minute)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Verify = %v, want %q", name, err, tt.want)
		}
	}
}

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func preemption(ws, owner string) Event {
	p, _, _ := strings.Cut(ws, "/")
	return Event{Event: schema.EventPreempted, At: at, Workspace: ws, Project: p, Owner: owner, State: "Preempting",
		Reason: "preempted by prod/serve (tier high above low)", PreemptedBy: "prod/serve", Node: "gpu-1",
		Next: "it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up", GraceSeconds: 300}
}

// TestSlackText: a Slack message says what happened, to which
// workspace, why and what happens next, one line per event; a summary
// counts and lists the first ones; Slack's markup characters are
// escaped.
func TestSlackText(t *testing.T) {
	refused := Event{Event: schema.EventRevisionRefused, At: at, Revision: "abc1234",
		Errors: []string{"specs/ws.yaml:3:9: spec.tier: there is no PriorityTier \"hgih\"; did you mean \"high\"?"},
		Next:   "revision 9f8e7d6 stays in force until a fixed one is pushed"}
	moved := Event{Event: schema.EventMoved, At: at, Workspace: "ml/train", Project: "ml", Reason: "moving: node gpu-1 is draining",
		Node: "gpu-1", Next: kinds[schema.EventMoved].next}
	tests := map[string]struct {
		b    Batch
		want string
	}{
		"events": {b: Batch{Events: []Event{preemption("ml/train", "alice"), moved, refused}},
			want: "*berth on lab*\n" +
				"• *ml/train* (alice) was preempted by prod/serve on gpu-1: preempted by prod/serve (tier high above low). _Next: it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up._\n" +
				"• *ml/train* is moving on gpu-1: moving: node gpu-1 is draining. _Next: it is stopped with its checkpoint grace and starts again elsewhere, keeping its place in the queue._\n" +
				"• Revision *abc1234* was refused (1 error):\n    `specs/ws.yaml:3:9: spec.tier: there is no PriorityTier \"hgih\"; did you mean \"high\"?`\n    _Next: revision 9f8e7d6 stays in force until a fixed one is pushed._"},
		"escaped": {b: Batch{Events: []Event{{Event: schema.EventFailed, Workspace: "ml/a", Reason: "its task exited with code 1 (<oom> & more)"}}},
			want: "*berth on lab*\n• *ml/a* failed: its task exited with code 1 (&lt;oom&gt; &amp; more)."},
	}
	for name, tt := range tests {
		if diff := cmp.Diff(tt.want, SlackText(tt.b, "lab")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	var many []Event
	for i := range 1000 {
		p := "ml"
		if i%4 == 0 {
			p = "cv"
		}
		e := preemption(p+"/w", "")
		e.Workspace = p + "/w" + string(rune('a'+i%26))
		many = append(many, e)
	}
	bs := Route([]schema.Notification{{Meta: schema.Meta{Name: "all"}, Spec: schema.NotificationSpec{SummarizeAbove: 5}}}, many)
	if len(bs) != 1 || bs[0].Summary == nil {
		t.Fatalf("1,000 events made %d batches, summary %v", len(bs), bs)
	}
	got := SlackText(bs[0], "lab")
	if !strings.HasPrefix(got, "*berth on lab: 1000 events in one cycle*: preempted 1000 (ml 750, cv 250)\nThe first 10:\n• *cv/wa* was preempted") {
		t.Errorf("summary:\n%s", got)
	}
	if n := strings.Count(got, "\n• "); n != MaxListed {
		t.Errorf("the summary lists %d events, want %d", n, MaxListed)
	}
	var doc struct{ Text string }
	body, _ := SlackBody(bs[0], "lab")
	if err := json.Unmarshal(body, &doc); err != nil || doc.Text != got {
		t.Errorf("SlackBody is not {\"text\": SlackText}: %v", err)
	}
}

// TestWebhookBody: the webhook's document as a receiver reads it.
func TestWebhookBody(t *testing.T) {
	b := Batch{Route: schema.Notification{Meta: schema.Meta{Name: "audit"}}, Events: []Event{preemption("ml/train", "alice")}}
	body, err := WebhookBody(b, "lab")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"berth.dev/notify/v1","notifier":"audit","cluster":"lab","events":[{"event":"preempted","at":"2026-03-01T12:00:00Z","workspace":"ml/train","project":"ml","owner":"alice","state":"Preempting","reason":"preempted by prod/serve (tier high above low)","next":"it has 5m0s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up","node":"gpu-1","preemptedBy":"prod/serve","graceSeconds":300}]}`
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

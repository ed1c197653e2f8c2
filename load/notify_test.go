package load

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/schema"
)

// notifyRepo routes ml's preemptions to Slack and every event to a
// signed webhook.
const notifyRepo = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec: {tier: low, quota: {gpus: 4}}
---
apiVersion: berth.dev/v1
kind: Notification
metadata: {name: ml-slack}
spec:
  format: slack
  url: {env: BERTH_SLACK_ML}
  projects: [ml]
  owners: [alice]
  events: [preempted, moved]
---
apiVersion: berth.dev/v1
kind: Notification
metadata: {name: audit}
spec:
  format: webhook
  url: {file: /run/secrets/audit-url}
  secret: {env: BERTH_AUDIT_KEY}
  summarizeAbove: 20
`

// TestNotifications: Notification documents load sorted by name, with
// the default summarizeAbove; the summary counts them.
func TestNotifications(t *testing.T) {
	r, err := CheckFS(fstest.MapFS{"specs.yaml": {Data: []byte(notifyRepo)}}, ".")
	if err != nil || r.Set == nil {
		t.Fatalf("CheckFS: %v %v", err, r.Diagnostics)
	}
	want := []schema.Notification{
		{Meta: schema.Meta{Name: "audit"}, Spec: schema.NotificationSpec{Format: "webhook", URL: schema.SecretRef{File: "/run/secrets/audit-url"},
			Secret: schema.SecretRef{Env: "BERTH_AUDIT_KEY"}, SummarizeAbove: 20}},
		{Meta: schema.Meta{Name: "ml-slack"}, Spec: schema.NotificationSpec{Format: "slack", URL: schema.SecretRef{Env: "BERTH_SLACK_ML"},
			Projects: []string{"ml"}, Owners: []string{"alice"}, Events: []string{"preempted", "moved"}, SummarizeAbove: schema.DefaultSummarizeAbove}},
	}
	if diff := cmp.Diff(want, r.Set.Notifications, ignorePositions); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
	if r.Summary.Notifications != 2 {
		t.Errorf("summary counts %d notifications, want 2", r.Summary.Notifications)
	}
	if n := r.Set.Notification("ml-slack"); n == nil || !n.Spec.Wants("moved") || n.Spec.Wants("failed") {
		t.Errorf("ml-slack wants %v", n)
	}
	if n := r.Set.Notification("audit"); n == nil || !n.Spec.Wants(schema.EventRevisionRefused) {
		t.Errorf("audit wants %v", n)
	}
}

// TestNotificationErrors: each mistake is one error at its field, that
// says what to write; a URL or a key written in the spec is refused, and
// the error never repeats it.
func TestNotificationErrors(t *testing.T) {
	const secretURL = "https://hooks.slack.com/services/T0001/B0001/abcdefXYZ123secret"
	tests := map[string]struct {
		edits []string
		want  string
	}{
		"literal url": {edits: []string{"url: {env: BERTH_SLACK_ML}", "url: " + secretURL},
			want: `specs.yaml:16:3: spec.url: got a value (not shown: it may be a credential), want a mapping: the URL is a secret: name where berth reads it, url: {env: BERTH_SLACK_URL} or url: {file: /run/secrets/slack-url}, never the URL itself`},
		"url in env": {edits: []string{"url: {env: BERTH_SLACK_ML}", "url: {env: \"" + secretURL + "\"}"},
			want: `specs.yaml:16:9: spec.url.env: a value (not shown: it may be a credential) is not valid: env is an environment variable's name, such as BERTH_SLACK_URL`},
		"literal key": {edits: []string{"secret: {env: BERTH_AUDIT_KEY}", "secret: 0123456789abcdef0123456789abcdef"},
			want: `specs.yaml:27:3: spec.secret: got a value (not shown: it may be a credential), want a mapping: secret names where berth reads the signing key: secret: {env: BERTH_HOOK_KEY} or {file: PATH}, never the key itself`},
		"relative file": {edits: []string{"/run/secrets/audit-url", "secrets/audit-url"},
			want: `specs.yaml:26:9: spec.url.file: a value (not shown: it may be a credential) is not valid: file is an absolute path, such as /run/secrets/slack-url`},
		"env and file": {edits: []string{"url: {env: BERTH_SLACK_ML}", "url: {env: BERTH_SLACK_ML, file: /run/x}"},
			want: `specs.yaml:16:3: notification "ml-slack": spec.url names both an environment variable and a file; give one: spec.url: {env: BERTH_SLACK_ML} or spec.url: {file: /run/x}`},
		"empty url": {edits: []string{"url: {env: BERTH_SLACK_ML}", "url: {}"},
			want: `specs.yaml:16:3: notification "ml-slack": spec.url names no secret; give where berth reads it: url: {env: BERTH_SLACK_URL} or url: {file: /run/secrets/slack-url}`},
		"webhook unsigned": {edits: []string{"  secret: {env: BERTH_AUDIT_KEY}\n", ""},
			want: `specs.yaml:25:3: notification "audit": a webhook is signed: give spec.secret, where berth reads the HMAC-SHA256 key (secret: {env: BERTH_HOOK_KEY} or secret: {file: PATH}); the receiver checks the X-Berth-Signature header with the same key`},
		"slack with secret": {edits: []string{"  projects: [ml]\n", "  projects: [ml]\n  secret: {env: KEY}\n"},
			want: `specs.yaml:18:3: notification "ml-slack": a Slack incoming webhook checks no signature, so it takes no secret: its URL is its credential; remove spec.secret`},
		"unknown project": {edits: []string{"projects: [ml]", "projects: [ml, mll]"},
			want: `specs.yaml:17:18: notification "ml-slack": there is no Project "mll"; did you mean "ml"?`},
		"unknown event": {edits: []string{"events: [preempted, moved]", "events: [preempted, evicted]"},
			want: `specs.yaml:19:23: spec.events.1: "evicted" is not allowed; use one of "preempted", "moved", "failed", "resumed", "overdue", "time-limit", "idle", "revision-applied", "revision-refused"`},
		"bad format": {edits: []string{"format: slack", "format: teams"},
			want: `specs.yaml:15:3: spec.format: "teams" is not allowed; use one of "webhook", "slack"`},
		"duplicate": {edits: []string{"name: audit", "name: ml-slack"},
			want: `specs.yaml:23:12: duplicate Notification "ml-slack": it is already defined at specs.yaml:11:1; rename or remove one`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := notifyRepo
			for i := 0; i < len(tt.edits); i += 2 {
				if !strings.Contains(src, tt.edits[i]) {
					t.Fatalf("%q is not in the repo", tt.edits[i])
				}
				src = strings.Replace(src, tt.edits[i], tt.edits[i+1], 1)
			}
			_, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
			for _, g := range got {
				if strings.Contains(g, "abcdef") {
					t.Errorf("a diagnostic repeats the secret: %s", g)
				}
			}
		})
	}
}

// TestNotifyEventsMatchSchema: the events the schema accepts are
// schema.NotifyEvents, in order: package notify maps onto these names.
func TestNotifyEventsMatchSchema(t *testing.T) {
	def := cuecontext.New().CompileBytes(Source).LookupPath(cue.MakePath(cue.Def(schema.KindNotification)))
	el, ok := schemaAt(def, []string{"spec", "events", "0"})
	if !ok {
		t.Fatal("the schema has no spec.events")
	}
	op, parts := el.Expr()
	if op != cue.OrOp {
		t.Fatalf("spec.events' elements are %v, want a disjunction", el)
	}
	var got []string
	for _, p := range parts {
		s, err := p.String()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if !slices.Equal(got, schema.NotifyEvents) {
		t.Errorf("the schema's events %v, schema.NotifyEvents %v", got, schema.NotifyEvents)
	}
}

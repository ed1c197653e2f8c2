package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// PayloadVersion is the webhook document's version.
const PayloadVersion = "berth.dev/notify/v1"

// Headers of a webhook delivery.
const (
	// SignatureHeader carries "t=UNIX,v1=HEX": HEX is the lower-case hex
	// HMAC-SHA256, keyed with the route's secret, of "UNIX." followed by
	// the body as sent (Stripe's scheme). A receiver recomputes it over
	// the raw body, compares in constant time, and refuses a timestamp
	// older than it tolerates (5 minutes is usual), which stops a replay.
	SignatureHeader = "X-Berth-Signature"
	// DeliveryHeader is the delivery's id, the same on every attempt: a
	// receiver that got it already can drop a retry.
	DeliveryHeader = "X-Berth-Delivery"
	// EventHeader names the batch's event, or "summary".
	EventHeader = "X-Berth-Event"
)

// Payload is a webhook's JSON body: one route's events of one cycle.
type Payload struct {
	Version  string `json:"version"`
	Notifier string `json:"notifier"`
	Cluster  string `json:"cluster,omitempty"`
	// Events are the cycle's events for the route, oldest first; with a
	// summary, the first Summary.Listed of them.
	Events  []Event  `json:"events"`
	Summary *Summary `json:"summary,omitempty"`
}

// WebhookBody is b's webhook document.
func WebhookBody(b Batch, cluster string) ([]byte, error) {
	p := Payload{Version: PayloadVersion, Notifier: b.Route.Meta.Name, Cluster: cluster, Events: b.Events, Summary: b.Summary}
	return json.Marshal(p)
}

// Sign is SignatureHeader's value for body sent at t, keyed with key.
func Sign(key, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(key, ts, body))
}

func mac(key []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a SignatureHeader value against body with key, as a
// receiver does: the signature must match, and its timestamp be within
// tolerance of now. It is the receiver's side of Sign, for Go receivers
// and for berth's tests.
func Verify(key, body []byte, header string, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("the signature header %q is not t=UNIX,v1=HEX", header)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key, ts, body)) {
		return fmt.Errorf("the signature does not match the body: another key, or a body changed on the way")
	}
	if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("the signature's timestamp is %s away from now, more than %s: a replay, or a clock that is off", text.Seconds(age.Abs()), tolerance)
	}
	return nil
}

// SlackBody is b's Slack incoming-webhook message: {"text": …}, one line
// per event (what happened, to which workspace, why, what happens next),
// or a summary's counts and its first events.
func SlackBody(b Batch, cluster string) ([]byte, error) {
	return json.Marshal(struct {
		Text string `json:"text"`
	}{SlackText(b, cluster)})
}

// SlackText is SlackBody's text, in Slack's mrkdwn (&, < and > escaped).
func SlackText(b Batch, cluster string) string {
	var sb strings.Builder
	where := ""
	if cluster != "" {
		where = " on " + slackEscape(cluster)
	}
	if s := b.Summary; s != nil {
		fmt.Fprintf(&sb, "*berth%s: %s in one cycle*: %s", where, text.Plural(s.Total, "event"), counts(s.Events))
		if len(s.Projects) > 0 {
			sb.WriteString(" (" + counts(s.Projects) + ")")
		}
		fmt.Fprintf(&sb, "\nThe first %d:", s.Listed)
	} else {
		fmt.Fprintf(&sb, "*berth%s*", where)
	}
	for _, e := range b.Events {
		sb.WriteString("\n• ")
		sb.WriteString(slackLine(e))
	}
	return sb.String()
}

// counts writes a count per key, the largest first, ties by key:
// "preempted 998, moved 2".
func counts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = slackEscape(k) + " " + strconv.Itoa(m[k])
	}
	return strings.Join(parts, ", ")
}

// slackLine is one event in a sentence or two.
func slackLine(e Event) string {
	k := kinds[e.Event]
	var sb strings.Builder
	if e.Workspace == "" {
		fmt.Fprintf(&sb, "Revision *%s* %s", slackEscape(e.Revision), k.did)
		if n := len(e.Errors); n > 0 {
			fmt.Fprintf(&sb, " (%s):", text.Plural(n, "error"))
			for _, err := range e.Errors[:min(n, 5)] {
				sb.WriteString("\n    `" + slackEscape(strings.ReplaceAll(err, "`", "'")) + "`")
			}
			if n > 5 {
				fmt.Fprintf(&sb, "\n    and %d more", n-5)
			}
			sb.WriteString("\n   ")
		} else {
			sb.WriteString(".")
		}
	} else {
		fmt.Fprintf(&sb, "*%s*", slackEscape(e.Workspace))
		if e.Owner != "" {
			fmt.Fprintf(&sb, " (%s)", slackEscape(e.Owner))
		}
		sb.WriteString(" " + didOf(e))
		if e.PreemptedBy != "" {
			sb.WriteString(" by " + slackEscape(e.PreemptedBy))
		}
		if e.Node != "" && e.Event != schema.EventResumed {
			sb.WriteString(" on " + slackEscape(e.Node))
		}
		if e.Reason != "" {
			sb.WriteString(": " + slackEscape(e.Reason))
		}
		if !strings.HasSuffix(sb.String(), ".") {
			sb.WriteString(".")
		}
	}
	if e.Next != "" {
		sb.WriteString(" _Next: " + slackEscape(e.Next) + "._")
	}
	return sb.String()
}

// slackEscape escapes what Slack's mrkdwn reads as markup.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

package schema

import "sort"

// KindNotification is the kind of a document that routes what happens to
// workspaces and revisions to a receiver (package notify sends it).
const KindNotification = "Notification"

// Formats of a Notification: what its receiver reads.
const (
	// NotifyWebhook is berth's own JSON document, signed with HMAC-SHA256.
	NotifyWebhook = "webhook"
	// NotifySlack is a Slack incoming webhook's message.
	NotifySlack = "slack"
)

// Events a Notification may ask for (spec.events), in the order the
// reference lists them. The first group concerns a workspace and is
// filtered by the route's projects and owners; the revision events
// concern the specs as a whole. Package notify maps the loop's timeline
// events onto these names; the schema's spec.events lists the same ones
// (a test in load keeps the two equal).
var NotifyEvents = []string{
	EventPreempted, EventMoved, EventFailed, EventResumed, EventOverdue, EventTimeLimit, EventIdle,
	EventRevisionApplied, EventRevisionRefused,
}

// The names of NotifyEvents.
const (
	// EventPreempted: a workspace was preempted (its checkpoint signal
	// sent) for another's sake.
	EventPreempted = "preempted"
	// EventMoved: a workspace is stopped to start again elsewhere: its
	// node drains, is down, or its GPU failed.
	EventMoved = "moved"
	// EventFailed: a workspace's run failed, or the cluster refused it.
	EventFailed = "failed"
	// EventResumed: a workspace runs again after a preemption or a move.
	EventResumed = "resumed"
	// EventOverdue: a workspace has waited past the scheduling policy's
	// aging.maxWait (once per wait).
	EventOverdue = "overdue"
	// EventTimeLimit: a workspace was stopped at its time limit.
	EventTimeLimit = "time-limit"
	// EventIdle: a workspace was stopped because its GPUs stayed idle.
	EventIdle = "idle"
	// EventRevisionApplied: a revision of the specs was put in force.
	EventRevisionApplied = "revision-applied"
	// EventRevisionRefused: a revision was refused, with its errors.
	EventRevisionRefused = "revision-refused"
)

// DefaultSummarizeAbove is a Notification's spec.summarizeAbove when it
// sets none: a cycle with more events than this for one route sends one
// summary instead.
const DefaultSummarizeAbove = 5

// Notification routes events to one receiver: which events (Events),
// of which workspaces (Projects, Owners), in which format, to which URL.
// The URL and the signing key are secrets: the spec names where berth's
// process reads them (SecretRef), never their values.
type Notification struct {
	Meta Meta             `json:"metadata"`
	Spec NotificationSpec `json:"spec"`
}

// NotificationSpec is the body of a Notification.
type NotificationSpec struct {
	// Format is NotifyWebhook or NotifySlack.
	Format string `json:"format"`
	// URL is where the receiver listens.
	URL SecretRef `json:"url"`
	// Secret is the webhook's HMAC key (NotifyWebhook only; required
	// there).
	Secret SecretRef `json:"secret,omitzero"`
	// Projects and Owners filter the workspace events: a route with
	// projects gets only theirs, with owners only the workspaces one of
	// them owns; empty: all. Revision events ignore them.
	Projects []string `json:"projects,omitempty"`
	Owners   []string `json:"owners,omitempty"`
	// Events are the events it gets (NotifyEvents' names); empty: all.
	Events []string `json:"events,omitempty"`
	// SummarizeAbove: a cycle with more events than this for the route
	// sends one summary (DefaultSummarizeAbove when not written).
	SummarizeAbove int `json:"summarizeAbove"`
}

// Wants reports whether the route asks for event (every event when it
// lists none).
func (s NotificationSpec) Wants(event string) bool {
	if len(s.Events) == 0 {
		return true
	}
	for _, e := range s.Events {
		if e == event {
			return true
		}
	}
	return false
}

// SecretRef is where berth's process reads a secret: the environment
// variable Env, or the file File (its content, trailing white space
// trimmed). Exactly one is set in a valid spec.
type SecretRef struct {
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// IsZero reports whether r names no secret.
func (r SecretRef) IsZero() bool { return r.Env == "" && r.File == "" }

// String says where the secret is read (never the secret): "$NAME" or
// the file's path.
func (r SecretRef) String() string {
	if r.Env != "" {
		return "$" + r.Env
	}
	return r.File
}

// Notification returns the Notification named name, or nil.
func (s *Set) Notification(name string) *Notification {
	i := sort.Search(len(s.Notifications), func(i int) bool { return s.Notifications[i].Meta.Name >= name })
	if i < len(s.Notifications) && s.Notifications[i].Meta.Name == name {
		return &s.Notifications[i]
	}
	return nil
}

package notify

import (
	"slices"
	"time"

	"github.com/berth-dev/berth/schema"
)

// Batch is what one route gets of one cycle: the cycle's events it asks
// for, oldest first, in one message. Above the route's summarizeAbove
// the message is a summary (Summary set) that counts them all and lists
// the first MaxListed.
type Batch struct {
	Route  schema.Notification
	Events []Event
	// Summary, when not nil, counts every event of the batch; Events then
	// holds only the first MaxListed.
	Summary *Summary
}

// Summary counts a cycle's events for one route when there are too many
// to send each.
type Summary struct {
	// Total is how many events the cycle had for the route.
	Total int `json:"total"`
	// Events and Projects count them by event and by project (revision
	// events have no project).
	Events   map[string]int `json:"events"`
	Projects map[string]int `json:"projects,omitempty"`
	// Listed is how many the message lists (the first ones).
	Listed int `json:"listed"`
}

// MaxListed is how many events a summary lists.
const MaxListed = 10

// Matches reports whether route r gets event e: it asks for e's event,
// and a workspace's event is of a project and an owner it names (any,
// when it names none). A revision's event ignores projects and owners.
func Matches(r schema.NotificationSpec, e Event) bool {
	if !r.Wants(e.Event) {
		return false
	}
	if e.Workspace == "" {
		return true
	}
	if len(r.Projects) > 0 && !slices.Contains(r.Projects, e.Project) {
		return false
	}
	if len(r.Owners) > 0 && !slices.Contains(r.Owners, e.Owner) {
		return false
	}
	return true
}

// Route groups one cycle's events by the routes that get them, in the
// routes' order (the Set's: by name); a route that gets none has no
// batch. A batch of more than its route's summarizeAbove events is a
// summary.
func Route(routes []schema.Notification, events []Event) []Batch {
	var out []Batch
	for _, r := range routes {
		var got []Event
		for _, e := range events {
			if Matches(r.Spec, e) {
				got = append(got, e)
			}
		}
		if len(got) == 0 {
			continue
		}
		b := Batch{Route: r, Events: got}
		limit := r.Spec.SummarizeAbove
		if limit <= 0 {
			limit = schema.DefaultSummarizeAbove
		}
		if len(got) > limit {
			b.Summary = summarize(got)
			b.Events = got[:min(len(got), MaxListed)]
			b.Summary.Listed = len(b.Events)
		}
		out = append(out, b)
	}
	return out
}

func summarize(events []Event) *Summary {
	s := &Summary{Total: len(events), Events: map[string]int{}, Projects: map[string]int{}}
	for _, e := range events {
		s.Events[e.Event]++
		if e.Project != "" {
			s.Projects[e.Project]++
		}
	}
	if len(s.Projects) == 0 {
		s.Projects = nil
	}
	return s
}

// at is when a batch's cycle happened: its last event's time.
func (b Batch) at() time.Time {
	var t time.Time
	for _, e := range b.Events {
		if e.At.After(t) {
			t = e.At
		}
	}
	return t
}

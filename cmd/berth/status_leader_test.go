package main

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/view"
)

// berth status names the leader, and says when the replica asked follows.
func TestPrintStatusLeader(t *testing.T) {
	tests := map[string]struct {
		leader leader.Status
		want   string
	}{
		"leading":   {leader.Status{Self: "a/1/x", Leader: "a/1/x", Leading: true, Term: 3}, "Leader:    this replica (a/1/x), term 3\n"},
		"following": {leader.Status{Self: "b/2/y", Leader: "a/1/x", Term: 3}, "Leader:    a/1/x; this replica (b/2/y) follows: read-only, it takes over if the leader dies\n"},
		"none":      {leader.Status{Self: "b/2/y"}, "Leader:    none yet; this replica (b/2/y) waits for the lease\n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			printStatus(&b, view.Status{Leader: &tt.leader})
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("got:\n%s\nwant a line %q", b.String(), tt.want)
			}
		})
	}
	var b strings.Builder
	printStatus(&b, view.Status{})
	if strings.Contains(b.String(), "Leader:") {
		t.Errorf("a berth without replicas names a leader:\n%s", b.String())
	}
}

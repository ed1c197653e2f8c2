package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/berth-dev/berth/view"
)

// BenchmarkPrintWorkspaces: the table berth apply and berth status print
// for a fleet of 10,000 workspaces, to a file as stdout is: 16 ms through
// a buffer at 564cf9c; 280-360 ms when tabwriter wrote each cell to it.
func BenchmarkPrintWorkspaces(b *testing.B) {
	ws := make([]view.WorkspaceStatus, 10000)
	for i := range ws {
		ws[i] = view.WorkspaceStatus{Project: fmt.Sprintf("team-%02d", i%20), Name: fmt.Sprintf("ws-%05d", i), State: "Pending", Reason: "starts; needs no GPU"}
	}
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		printWorkspaces(f, ws, false)
	}
}

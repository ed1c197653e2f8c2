package reconcile

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A run of refused revisions keeps one series for the last refused one,
// beside the one in force.
func TestRevisionSeriesBounded(t *testing.T) {
	m := NewMetrics()
	series := func() map[string]string {
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, mf := range mfs {
			if mf.GetName() != "berth_revision_info" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range mt.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				out[l["state"]+" "+l["revision"]] = fmt.Sprint(mt.GetGauge().GetValue())
			}
		}
		return out
	}
	m.revision("good0000", true)
	for i := range 100 {
		m.revision(fmt.Sprintf("bad%05d", i), false)
	}
	if diff := cmp.Diff(map[string]string{"in_force good0000": "1", "refused bad00099": "1"}, series()); diff != "" {
		t.Errorf("after 100 refused revisions (-want +got):\n%s", diff)
	}
	m.revision("good0001", true)
	if diff := cmp.Diff(map[string]string{"in_force good0001": "1"}, series()); diff != "" {
		t.Errorf("after a good one (-want +got):\n%s", diff)
	}
}

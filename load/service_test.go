package load

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

// TestServiceOrdering: the policy's service (steps in GPU-hours,
// ascending; promote) and a tier's ordering are read as written, the
// default where absent; steps out of order, a negative promote and an
// unknown ordering are errors at their fields.
func TestServiceOrdering(t *testing.T) {
	const tier = "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20%s}\n"
	const policy = "apiVersion: berth.dev/v1\nkind: SchedulingPolicy\nmetadata: {name: default}\nspec: {%s}\n"
	tests := map[string]struct {
		policy, tier string
		want         schema.ServicePolicy
		ordering     schema.Ordering
		err          string
	}{
		"defaults":   {want: schema.DefaultPolicy().Spec.Service},
		"written":    {policy: "service: {steps: [1, 4.5, 16], promote: 3}", tier: ", ordering: all", want: schema.ServicePolicy{Steps: []float64{1, 4.5, 16}, Promote: 3}, ordering: schema.OrderingAll},
		"off":        {policy: "service: {steps: []}", tier: ", ordering: off", want: schema.ServicePolicy{Steps: []float64{}, Promote: 16}, ordering: schema.OrderingOff},
		"no promote": {policy: "service: {promote: 0}", want: schema.ServicePolicy{Steps: []float64{2, 8, 32, 128}}},
		"unordered":  {policy: "service: {steps: [8, 2]}", err: "p.yaml:4:29: spec.service.steps: 2 GPU-hours comes after 8; write the steps in ascending order, such as [2, 8, 32]"},
		"zero step":  {policy: "service: {steps: [0, 2]}", err: "p.yaml:4:26: spec.service.steps.0: 0 is out of range (it must be >0)"},
		"negative":   {policy: "service: {promote: -1}", err: "promote is a number such as 8 (0: never)"},
		"ordering":   {tier: ", ordering: sometimes", err: `spec.ordering: "sometimes" is not allowed; use one of "on", "off", "all"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"t.yaml": {Data: []byte(strings.Replace(tier, "%s", tt.tier, 1))}}
			if tt.policy != "" {
				fsys["p.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(policy, "%s", tt.policy, 1))}
			}
			set, diags, err := FS(fsys, ".")
			if tt.err != "" {
				var msgs []string
				for _, d := range diags {
					msgs = append(msgs, d.String())
				}
				if !strings.Contains(strings.Join(msgs, "\n"), tt.err) {
					t.Fatalf("diagnostics %q (err %v), want one containing %q", msgs, err, tt.err)
				}
				return
			}
			if err != nil || len(diags) > 0 {
				t.Fatalf("load: %v %v", err, diags)
			}
			if diff := cmp.Diff(tt.want, set.Policy.Spec.Service); diff != "" {
				t.Errorf("service (-want +got):\n%s", diff)
			}
			if got := set.Tiers[0].Spec.Ordering; got != tt.ordering {
				t.Errorf("ordering = %q, want %q", got, tt.ordering)
			}
		})
	}
}

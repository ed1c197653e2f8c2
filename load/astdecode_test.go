package load

import (
	"bytes"
	"testing"

	"cuelang.org/go/encoding/yaml"
	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/schema"
)

// TestDecodeAST: the fast decoder fills every kind of raw field: nested
// structs, pointers, lists of structs, maps, quantities from numbers and
// strings, and leaves absent fields nil.
func TestDecodeAST(t *testing.T) {
	src := `apiVersion: berth.dev/v1
kind: Workspace
metadata:
  name: w
  project: p
  labels: {team: ml}
spec:
  owner: alice
  task:
    image: x
    args: [a, "2"]
    env: {A: "1", B: b}
  resources: {gpus: 2, cpu: 0.5, memory: 16Gi}
  topology: {numa: required}
  replicas: 3
  volumes:
  - {name: v, mountPath: /d, readOnly: true}
  checkpoint: {gracePeriod: 30s}
  preemptible: false
`
	expr, err := yaml.NewDecoder("w.yaml", bytes.NewReader([]byte(src))).Extract()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRaw(schema.KindWorkspace, expr)
	if err != nil {
		t.Fatal(err)
	}
	want := &rawWorkspace{Metadata: rawMeta{Name: "w", Project: "p", Labels: map[string]string{"team": "ml"}}}
	three, no, required := 3, false, schema.ConstraintRequired
	s := &want.Spec
	s.Owner = "alice"
	s.Task = schema.Task{Image: "x", Args: []string{"a", "2"}, Env: map[string]string{"A": "1", "B": "b"}}
	s.Resources = rawResources{GPUs: 2, CPU: quantity{"0.5", true}, Memory: quantity{"16Gi", true}}
	s.Topology = &rawTopology{NUMA: &required}
	s.Replicas = &three
	s.Volumes = []schema.VolumeMount{{Name: "v", MountPath: "/d", ReadOnly: true}}
	s.Checkpoint = &rawCheckpoint{GracePeriod: &quantity{"30s", true}}
	s.Preemptible = &no
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(quantity{})); diff != "" {
		t.Errorf("decodeRaw (-want +got):\n%s", diff)
	}
}

package pack_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/pack"
)

const berthPack = "../../packs/berth"

func load(t *testing.T) *pack.Pack {
	t.Helper()
	p, err := pack.Load(berthPack)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var required = map[string]string{
	"image": "registry.example.com/berth:v1", "specs_repo": "https://git.example.com/ml/cluster-specs",
	"agent_artifact": "https://files.example.com/berth_linux_amd64.tar.gz",
}

func with(kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range required {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestPackDefaults: the pack reads as nomad-pack reads it, its metadata
// names it, and with the required values it renders both jobs: the
// reconciler with workload identity (the default), the agent.
func TestPackDefaults(t *testing.T) {
	p := load(t)
	if p.Meta["pack.name"] != "berth" {
		t.Errorf("pack.name = %v", p.Meta["pack.name"])
	}
	if d := p.Vars["nomad_addr"].Default; d != "http://${attr.unique.network.ip-address}:4646" {
		t.Errorf("nomad_addr's default: %q ($${ is HCL's escape of ${)", d)
	}
	r, err := p.Render(with())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); len(got) != 2 || got[0] != "berth.nomad.tpl" || got[1] != "berth_agent.nomad.tpl" {
		t.Fatalf("rendered %v", got)
	}
	rec := r.Jobs["berth.nomad.tpl"]
	for _, want := range []string{
		`job "berth" {`, `count = 2`, `static = 4680`, `image = "registry.example.com/berth:v1"`,
		`"--repo=https://git.example.com/ml/cluster-specs"`, `"--source", "${NOMAD_ALLOC_DIR}/specs/current",`,
		"identity {\n        env = true\n      }", `NOMAD_ADDR = "unix://${NOMAD_SECRETS_DIR}/api.sock"`,
		`{{ with nomadVar "nomad/jobs/berth" }}{{ .ui_token }}{{ end }}`,
	} {
		if !strings.Contains(rec, want) {
			t.Errorf("the reconciler lacks %q:\n%s", want, rec)
		}
	}
	if strings.Contains(rec, "NOMAD_TOKEN=") {
		t.Errorf("with workload identity the reconciler still renders a static token:\n%s", rec)
	}
	agent := r.Jobs["berth_agent.nomad.tpl"]
	for _, want := range []string{
		`job "berth-agent" {`, `source = "https://files.example.com/berth_linux_amd64.tar.gz"`, `command = "local/berth"`,
		"identity {\n        env = true\n      }", `NOMAD_ADDR    = "unix://${NOMAD_SECRETS_DIR}/api.sock"`,
	} {
		if !strings.Contains(agent, want) {
			t.Errorf("the agent lacks %q:\n%s", want, agent)
		}
	}
	if strings.Contains(agent, "NOMAD_TOKEN=") {
		t.Errorf("with workload identity the agent still renders a static token:\n%s", agent)
	}
	if !strings.Contains(r.Outputs, "nomad var get -item ui_token nomad/jobs/berth") {
		t.Errorf("outputs:\n%s", r.Outputs)
	}
}

// TestPackChoices: each variable that chooses changes what it should.
func TestPackChoices(t *testing.T) {
	p := load(t)
	r, err := p.Render(with("workload_identity", "false", "agent_enabled", "false", "job_name", "gpu-gitops"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 {
		t.Fatalf("agent_enabled=false still renders %v", r.Names())
	}
	rec := r.Jobs["berth.nomad.tpl"]
	for _, want := range []string{`job "gpu-gitops" {`, `{{ with nomadVar "nomad/jobs/gpu-gitops" }}NOMAD_TOKEN={{ .token }}{{ end }}`, `NOMAD_ADDR = "http://${attr.unique.network.ip-address}:4646"`} {
		if !strings.Contains(rec, want) {
			t.Errorf("static token: lacks %q:\n%s", want, rec)
		}
	}
	if strings.Contains(rec, "identity {") {
		t.Error("workload_identity=false still renders an identity block")
	}

	// The agent: the static token, a berth on the nodes, more environment.
	r, err = p.Render(with("workload_identity", "false", "job_name", "gpu-gitops", "agent_artifact", "", "agent_command", "/opt/berth/berth",
		"agent_env", `{"LD_LIBRARY_PATH": "/usr/lib/nvidia", "A_FLAG": "${node.unique.name}"}`))
	if err != nil {
		t.Fatal(err)
	}
	agent := r.Jobs["berth_agent.nomad.tpl"]
	for _, want := range []string{
		`job "gpu-gitops-agent" {`, `{{ with nomadVar "nomad/jobs/gpu-gitops-agent" }}NOMAD_TOKEN={{ .token }}{{ end }}`,
		`NOMAD_ADDR    = "http://${attr.unique.network.ip-address}:4646"`, `command = "/opt/berth/berth"`,
		"        A_FLAG = \"${node.unique.name}\"\n        LD_LIBRARY_PATH = \"/usr/lib/nvidia\"\n      }",
	} {
		if !strings.Contains(agent, want) {
			t.Errorf("agent with a static token and agent_command: lacks %q:\n%s", want, agent)
		}
	}
	for _, not := range []string{"identity {", "artifact {", "api.sock"} {
		if strings.Contains(agent, not) {
			t.Errorf("agent with a static token and agent_command: still has %q:\n%s", not, agent)
		}
	}

	r, err = p.Render(with("driver", "raw_exec", "berth_command", "/opt/berth", "specs_from", "berth", "specs_ref", "main", "replicas", "1", "interval", "5s"))
	if err != nil {
		t.Fatal(err)
	}
	rec = r.Jobs["berth.nomad.tpl"]
	for _, want := range []string{`driver = "raw_exec"`, `command = "/opt/berth"`, `"--source", "https://git.example.com/ml/cluster-specs", "--branch", "main",`, `count = 1`, `"--interval", "5s",`} {
		if !strings.Contains(rec, want) {
			t.Errorf("raw_exec, berth's git source: lacks %q:\n%s", want, rec)
		}
	}
	for _, not := range []string{"git-sync", "specs-init", "image =", "ports ="} {
		if strings.Contains(rec, not) {
			t.Errorf("raw_exec, berth's git source: still has %q:\n%s", not, rec)
		}
	}
}

// TestPackRefuses: a missing required value, an unknown choice, an
// unknown variable or a value of the wrong type is an error that names it.
func TestPackRefuses(t *testing.T) {
	p := load(t)
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"specs_repo": "x", "agent_enabled": "false"}, "image: berth's container image"},
		{with("specs_repo", ""), "specs_repo"},
		{with("driver", "podman"), "driver: docker or raw_exec"},
		{with("specs_from", "svn"), "specs_from: git-sync or berth"},
		{with("agent_artifact", ""), "agent_artifact"},
		{with("replicas", "two"), "--var replicas=two"},
		{with("agent_env", `{"N": 1}`), "--var agent_env"},
		{with("colour", "blue"), "--var colour"},
	} {
		_, err := p.Render(c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %q", c.set, err, c.want)
		}
	}
}

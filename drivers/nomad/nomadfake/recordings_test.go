package nomadfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exchange is one recorded request and response (testdata/RECORDINGS.md).
type exchange struct {
	Request struct {
		Method string            `json:"method"`
		Path   string            `json:"path"`
		Query  map[string]string `json:"query"`
		Body   json.RawMessage   `json:"body"`
	} `json:"request"`
	Response struct {
		Status int             `json:"status"`
		Index  *uint64         `json:"index"`
		Body   json.RawMessage `json:"body"`
	} `json:"response"`
}

func load(t *testing.T, prefix string) exchange {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "testdata", prefix+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("recording %s: found %v", prefix, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var x exchange
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return x
}

const recordedNode = "1317ad6e-a51d-6fef-4356-9a7348e09a61"

// recordedCluster is the node of the recordings: 4 fake H100s.
func recordedCluster() *Server {
	s := New()
	s.AddNode(Node{ID: recordedNode, Name: "gpu-node-1", GPUs: []GPU{
		{ID: "GPU-fake-0", PCIBusID: "00000000:18:00.0", Healthy: true},
		{ID: "GPU-fake-1", PCIBusID: "00000000:2a:00.0", Healthy: true},
		{ID: "GPU-fake-2", PCIBusID: "00000000:ba:00.0", Healthy: true},
		{ID: "GPU-fake-3", PCIBusID: "00000000:db:00.0", Healthy: true},
	}, Meta: map[string]string{"connect.log_level": "info"}})
	return s
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// replay sends the recorded request (after edit, which may rewrite the
// body or query to this fake's indexes) and checks what every recording
// promises: the status, whether X-Nomad-Index is there, JSON or text, and
// a text body word for word (numbers aside when loose is set).
func replay(t *testing.T, srv string, prefix string, loose bool, edit func(q url.Values, body map[string]any)) reply {
	t.Helper()
	x := load(t, prefix)
	q := url.Values{}
	for k, v := range x.Request.Query {
		q.Set(k, v)
	}
	var body map[string]any
	if len(x.Request.Body) > 0 && string(x.Request.Body) != "null" {
		_ = json.Unmarshal(x.Request.Body, &body)
	}
	if edit != nil {
		edit(q, body)
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		b = bytes.ReplaceAll(b, []byte("NODE-ID"), []byte(recordedNode))
		rd = bytes.NewReader(b)
	}
	u := srv + x.Request.Path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequest(x.Request.Method, u, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	r := reply{resp.StatusCode, resp.Header, got}
	if r.status != x.Response.Status {
		t.Errorf("%s: status %d, recorded %d (body %q)", prefix, r.status, x.Response.Status, got)
	}
	if has := resp.Header.Get("X-Nomad-Index") != ""; has != (x.Response.Index != nil) && !(x.Response.Index != nil && *x.Response.Index == 0) {
		t.Errorf("%s: X-Nomad-Index present=%v, recorded %v", prefix, has, x.Response.Index)
	}
	var recText string
	if json.Unmarshal(x.Response.Body, &recText) == nil && prefix != "02" {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && recText != "" {
			t.Errorf("%s: JSON answer where Nomad answers text %q", prefix, recText)
		}
		norm := func(s string) string { return s }
		if loose {
			re := regexp.MustCompile(`[0-9]+`)
			norm = func(s string) string { return re.ReplaceAllString(s, "N") }
		}
		if prefix == "21" { // the parser's detail differs; the frame is Nomad's
			norm = func(s string) string { s, _, _ = strings.Cut(s, "expression:"); return s }
		}
		if norm(string(got)) != norm(recText) {
			t.Errorf("%s: body %q, recorded %q", prefix, got, recText)
		}
	}
	return r
}

func TestFakeAnswersAsRecorded(t *testing.T) {
	s := recordedCluster()
	ts := s.Start(t)
	u := ts.URL

	// Namespaces: create (empty body + index), read, delete, 404.
	for _, p := range []string{"05", "06", "07"} {
		replay(t, u, p, false, nil)
	}
	got := replay(t, u, "09", false, nil).json(t)
	if got["Description"] != "Berth team tier: high priority workspaces" {
		t.Errorf("09: namespace = %v", got)
	}
	replay(t, u, "10", false, nil)
	replay(t, u, "11", false, nil)

	// Scheduler configuration: defaults, CAS applied, stale CAS is 200 Updated:false.
	cfg := replay(t, u, "12", false, nil).json(t)
	pc := cfg["SchedulerConfig"].(map[string]any)["PreemptionConfig"].(map[string]any)
	if pc["BatchSchedulerEnabled"] != false || pc["SystemSchedulerEnabled"] != true {
		t.Errorf("12: default preemption config = %v", pc)
	}
	mod := strconv.Itoa(int(cfg["SchedulerConfig"].(map[string]any)["ModifyIndex"].(float64)))
	setCAS := func(q url.Values, _ map[string]any) { q.Set("cas", mod) }
	if r := replay(t, u, "13", false, setCAS).json(t); r["Updated"] != true {
		t.Errorf("13: %v", r)
	}
	if r := replay(t, u, "14", false, setCAS).json(t); r["Updated"] != false {
		t.Errorf("14: stale cas: %v", r)
	}

	// Dynamic node metadata: set, null unsets, read.
	replay(t, u, "16", false, nil)
	r := replay(t, u, "17", false, nil).json(t)
	if _, ok := r["Dynamic"].(map[string]any)["berth.reserved-by"]; ok {
		t.Errorf("17: null did not unset: %v", r["Dynamic"])
	}
	if _, ok := r["Meta"].(map[string]any)["berth.gpu.topology"]; !ok {
		t.Errorf("17: merged Meta lacks the dynamic key: %v", r["Meta"])
	}
	replay(t, u, "18", false, nil)
	replay(t, u, "21", false, nil) // bad filter: 400 text
	var nodes []map[string]any
	_ = json.Unmarshal(replay(t, u, "19", false, nil).body, &nodes)
	if len(nodes) != 1 {
		t.Errorf("19: a Meta filter on nodes sees the dynamic metadata: %d nodes", len(nodes))
	}

	// Jobs: register, list stubs without and with Meta.
	reg := replay(t, u, "23", false, nil).json(t)
	jmi := int(reg["JobModifyIndex"].(float64))
	var stubs []map[string]any
	_ = json.Unmarshal(replay(t, u, "24", false, nil).body, &stubs)
	if len(stubs) != 1 || stubs[0]["Meta"] != nil {
		t.Errorf("24: stubs must omit Meta: %v", stubs)
	}
	_ = json.Unmarshal(replay(t, u, "26", false, nil).body, &stubs)
	if len(stubs) != 1 || stubs[0]["Meta"] == nil {
		t.Errorf("26: ?meta=true must add Meta: %v", stubs)
	}
	// EnforceIndex: stale is a 500 with Nomad's message; current and
	// unchanged keeps JobModifyIndex.
	replay(t, u, "34", true, func(_ url.Values, b map[string]any) { b["JobModifyIndex"] = jmi - 1 })
	again := replay(t, u, "35", false, func(_ url.Values, b map[string]any) { b["JobModifyIndex"] = jmi }).json(t)
	if int(again["JobModifyIndex"].(float64)) != jmi {
		t.Errorf("35: unchanged re-register moved JobModifyIndex %d -> %v", jmi, again["JobModifyIndex"])
	}
	replay(t, u, "36", false, nil) // priority 101: 500 multierror text

	// A namespace with a live job cannot be deleted.
	replay(t, u, "59", false, nil)

	// Stop is not purge.
	replay(t, u, "37", false, nil)
	j := replay(t, u, "38", false, nil).json(t)
	if j["Stop"] != true || j["Status"] != "dead" {
		t.Errorf("38: after stop: Stop=%v Status=%v", j["Stop"], j["Status"])
	}
	replay(t, u, "41", false, nil)
	replay(t, u, "42", false, nil)

	// Variables: create cas=0, conflict 409 with the current variable,
	// update, stale update, read, list, stale delete, delete 204, 404.
	v := replay(t, u, "60", false, nil).json(t)
	first := strconv.Itoa(int(v["ModifyIndex"].(float64)))
	c := replay(t, u, "61", false, nil)
	if !strings.HasPrefix(c.header.Get("Content-Type"), "text/plain") || c.json(t)["Items"].(map[string]any)["team-medium.gpu_hours"] != "12.5" {
		t.Errorf("61: conflict must carry the current variable as text/plain: %s %q", c.header.Get("Content-Type"), c.body)
	}
	v = replay(t, u, "62", false, func(q url.Values, _ map[string]any) { q.Set("cas", first) }).json(t)
	second := strconv.Itoa(int(v["ModifyIndex"].(float64)))
	replay(t, u, "63", false, func(q url.Values, _ map[string]any) { q.Set("cas", first) })
	replay(t, u, "64", false, nil)
	replay(t, u, "65", false, nil)
	replay(t, u, "66", false, func(q url.Values, _ map[string]any) { q.Set("cas", first) })
	replay(t, u, "67", false, func(q url.Values, _ map[string]any) { q.Set("cas", second) })
	replay(t, u, "68", false, nil)

	// Not-found answers.
	for _, p := range []string{"72", "73", "74", "75", "76", "77"} {
		replay(t, u, p, false, nil)
	}
}

// TestFakePinnedGPUs reproduces recordings 78-82: a pin to free GPUs gets
// exactly those; a pin to a busy GPU while others are free is placed with
// no GPU at all and fails (Nomad 1.6).
func TestFakePinnedGPUs(t *testing.T) {
	s := recordedCluster()
	u := s.Start(t).URL
	replay(t, u, "80", false, nil)
	s.Settle()
	got := s.AllocsOf("default", "pin-free")
	if len(got) != 1 || strings.Join(deviceIDs(got[0]), ",") != "GPU-fake-0,GPU-fake-3" || got[0].ClientStatus != "running" {
		t.Fatalf("pin-free: %+v", got)
	}
	// GPU-fake-1 goes busy; pinning to it while 2 is free hits the trap.
	s.RegisterForeignJob("default", "other", recordedNode, []string{"GPU-fake-1"})
	x := load(t, "79")
	var body map[string]any
	_ = json.Unmarshal(x.Request.Body, &body)
	delete(body, "Diff")
	b, _ := json.Marshal(body)
	b = bytes.ReplaceAll(b, []byte("NODE-ID"), []byte(recordedNode))
	req, _ := http.NewRequest("PUT", u+"/v1/jobs", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("register pin-busy: %v %v", resp, err)
	}
	resp.Body.Close()
	busy := s.AllocsOf("default", "pin-busy")
	want := load(t, "82")
	var rec struct {
		ClientStatus, DesiredStatus string
	}
	_ = json.Unmarshal(want.Response.Body, &rec)
	if len(busy) != 1 || len(deviceIDs(busy[0])) != 0 || busy[0].ClientStatus != rec.ClientStatus || busy[0].DesiredStatus != rec.DesiredStatus {
		t.Fatalf("pin-busy: want one %s/%s alloc with no GPU (recording 82), got %+v", rec.DesiredStatus, rec.ClientStatus, busy)
	}
	// With every GPU busy, the pinned job blocks instead.
	s.RegisterForeignJob("default", "other2", recordedNode, []string{"GPU-fake-2"})
	b = bytes.ReplaceAll(b, []byte(`"pin-busy"`), []byte(`"pin-blocked"`))
	req, _ = http.NewRequest("PUT", u+"/v1/jobs", bytes.NewReader(b))
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if n := len(s.AllocsOf("default", "pin-blocked")); n != 0 {
		t.Errorf("pin-blocked: %d allocs, want none (blocked eval)", n)
	}
}

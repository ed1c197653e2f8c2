package clustertest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/schema"
)

// Line is one line of compact test text split at spaces: "node a gpus=2
// draining" has Words [node a draining], KV {gpus: 2} and Flags {node, a,
// draining}. Fields makes it; its methods read its KV and never change it.
type Line struct {
	// Words are the words without "=", in order: the line's kind, its
	// name, its flags.
	Words []string
	// KV holds the key=value words; a key given twice keeps the last.
	KV map[string]string
	// Flags holds Words as a set.
	Flags map[string]bool
}

// Lines splits text into its lines, each trimmed of surrounding space,
// leaving out blank lines and comments (lines starting with #).
func Lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// Fields splits line at spaces into a Line. KV and Flags are never nil.
func Fields(line string) Line {
	f := Line{KV: map[string]string{}, Flags: map[string]bool{}}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			f.KV[k] = v
		} else {
			f.Words = append(f.Words, w)
			f.Flags[w] = true
		}
	}
	return f
}

// Int reads key=N; key=unlimited is schema.Unlimited, and def is the
// value when key is absent.
func (f Line) Int(key string, def int) (int, error) {
	v, ok := f.KV[key]
	if !ok {
		return def, nil
	}
	if v == "unlimited" {
		return schema.Unlimited, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return n, nil
}

// CPU reads key=CORES (whole cores: 2) or key=MILLICORES (500m) as MHz
// at 1000 MHz a core; 0 when key is absent.
func (f Line) CPU(key string) (int64, error) {
	v, ok := f.KV[key]
	if !ok {
		return 0, nil
	}
	var cpu int64
	var err error
	if m, ok := strings.CutSuffix(v, "m"); ok {
		cpu, err = strconv.ParseInt(m, 10, 64)
	} else {
		cpu, err = strconv.ParseInt(v, 10, 64)
		cpu *= 1000
	}
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return cpu, nil
}

// Size reads key=SIZE in bytes: 64Gi, 512Mi, or a plain number of bytes;
// 0 when key is absent.
func (f Line) Size(key string) (int64, error) {
	v, ok := f.KV[key]
	if !ok {
		return 0, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "Gi"):
		v, mult = strings.TrimSuffix(v, "Gi"), 1<<30
	case strings.HasSuffix(v, "Mi"):
		v, mult = strings.TrimSuffix(v, "Mi"), 1<<20
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return n * mult, nil
}

// Resources reads the line's cpu= (CPU), mem= and disk= (Size) and
// cores= (Int) fields, each 0 when absent.
func (f Line) Resources() (cpu, mem, disk int64, cores int, err error) {
	if cpu, err = f.CPU("cpu"); err != nil {
		return
	}
	if mem, err = f.Size("mem"); err != nil {
		return
	}
	if disk, err = f.Size("disk"); err != nil {
		return
	}
	cores, err = f.Int("cores", 0)
	return
}

// List reads key=a,b,… sorted; nil when key is absent, empty (not nil)
// for key=.
func (f Line) List(key string) []string {
	v, ok := f.KV[key]
	if !ok {
		return nil
	}
	out := []string{}
	if v != "" {
		out = strings.Split(v, ",")
	}
	sort.Strings(out)
	return out
}

// Placement reads dc=a,b pool=P class=C meta=k:v,k2:v2: a workspace's or
// project's placement, or a node's datacenter, pool, class and metadata.
func (f Line) Placement() schema.Placement {
	p := schema.Placement{Datacenters: f.List("dc"), NodePool: f.KV["pool"], NodeClass: f.KV["class"]}
	for _, kv := range f.List("meta") {
		k, v, _ := strings.Cut(kv, ":")
		if p.NodeMeta == nil {
			p.NodeMeta = map[string]string{}
		}
		p.NodeMeta[k] = v
	}
	return p
}

// Rel reads a duration relative to now (-30m, +5s) as a time.
func Rel(now time.Time, s string) (time.Time, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(d), nil
}

// ParseRef reads PROJECT/NAME.
func ParseRef(s string) (schema.Ref, error) {
	var r schema.Ref
	err := r.UnmarshalText([]byte(s))
	return r, err
}

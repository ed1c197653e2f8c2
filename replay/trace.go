package replay

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Job is one job of a trace: when it was submitted, how much work it does,
// how many GPUs it needs and whose it is. Tier and Checkpoint may be left
// empty (Tier "") or unset (Checkpoint < 0): the Mapping fills them.
type Job struct {
	// ID is unique in the trace; the readers number jobs in submit order.
	ID       string
	Submit   time.Time
	Duration time.Duration
	GPUs     int
	// Project is the trace's tenant (a Philly virtual cluster).
	Project string
	Tier    string
	// Source is the format the job was read from ("": built by hand).
	Source Format
	// Checkpoint is how often the job saves its work; 0 never, < 0 unset.
	Checkpoint time.Duration
	// Kind names the GPU kind the job runs on (the CSV's gpu_kind
	// column): a kind the cluster file declares, or a model of its GPUs
	// where it declares none (Kinds). Empty: any whole GPU.
	Kind string
	// File and Line are where the trace gave the job: its file (empty
	// when not read by ReadFile) and line (0: built by hand).
	File string
	Line int
}

// Format names a trace format.
type Format string

const (
	// FormatCSV is berth's generic trace format (see Read and WriteCSV).
	FormatCSV Format = "csv"
	// FormatPhilly is the Pollux extract of the Microsoft Philly trace.
	FormatPhilly Format = "philly"
)

// phillyHeader is the header line of the Philly extract.
const phillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster"

// ReadFile reads a trace file in format f ("" detects it from the header).
func ReadFile(path string, f Format) ([]Job, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read trace: %w", err)
	}
	defer file.Close()
	jobs, err := Read(file, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range jobs {
		jobs[i].File = path
	}
	return jobs, nil
}

// Read reads a trace in format f ("" detects it: a header of exactly the
// Philly columns is Philly, anything else the generic CSV), gzip-compressed
// or not. Jobs come back sorted by submit time (ties: original line order)
// and numbered j000001… in that order.
func Read(r io.Reader, f Format) ([]Job, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	if f == "" {
		peek, _ := br.Peek(len(phillyHeader) + 2)
		if strings.HasPrefix(strings.TrimPrefix(string(peek), "\ufeff"), phillyHeader) {
			f = FormatPhilly
		} else {
			f = FormatCSV
		}
	}
	var jobs []Job
	var err error
	switch f {
	case FormatPhilly:
		jobs, err = readPhilly(br)
	case FormatCSV:
		jobs, err = readCSV(br)
	default:
		return nil, fmt.Errorf("trace format %q: want philly or csv", f)
	}
	if err != nil {
		return nil, err
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Submit.Before(jobs[j].Submit) })
	number(jobs)
	return jobs, nil
}

// ReadFiles reads several trace files as one trace, a longer history
// kept in several exports (a file a month): each file in format f (""
// detects each file's format from its own header), their jobs merged
// and sorted by submit time (ties: the files' order, then line order)
// and numbered j000001… in that order, so that IDs stay unique across
// the files. One file reads as ReadFile reads it. Errors name the file
// at fault.
func ReadFiles(paths []string, f Format) ([]Job, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("replay: read trace: no files")
	}
	if len(paths) == 1 {
		return ReadFile(paths[0], f)
	}
	var all []Job
	for _, path := range paths {
		jobs, err := ReadFile(path, f)
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
	}
	// Each file's jobs are sorted already, the files in the order given:
	// a stable sort keeps ties in file order, then in line order.
	sort.SliceStable(all, func(i, j int) bool { return all[i].Submit.Before(all[j].Submit) })
	number(all)
	return all, nil
}

// number gives jobs, in their order, the IDs j000001… (six digits at
// least, as many as the count needs). The IDs are slices of one string:
// a string of its own a job would be an object a job for the garbage
// collector to mark, all through the replay.
func number(jobs []Job) {
	width := max(6, len(strconv.Itoa(len(jobs)))) + 1
	buf := make([]byte, 0, width*len(jobs))
	for i := range jobs {
		buf = fmt.Appendf(buf, "j%0*d", width-1, i+1)
	}
	ids := string(buf)
	for i := range jobs {
		jobs[i].ID = ids[i*width : (i+1)*width]
	}
}

// records reads CSV records with a header, skipping blank lines and lines
// starting with #; fn gets each record with its line number.
func records(r io.Reader, fn func(header map[string]int, rec []string, line int) error) error {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("empty trace: want a header line")
		}
		return fmt.Errorf("header: %w", err)
	}
	header := map[string]int{}
	for i, h := range head {
		header[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if err := fn(header, rec, line); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

func field(header map[string]int, rec []string, name string) (string, bool) {
	i, ok := header[name]
	if !ok || i >= len(rec) {
		return "", false
	}
	return strings.TrimSpace(rec[i]), true
}

func readPhilly(r io.Reader) ([]Job, error) {
	var jobs []Job
	err := records(r, func(h map[string]int, rec []string, line int) error {
		ts, _ := field(h, rec, "timestamp")
		submit, err := time.Parse(time.DateTime, ts)
		if err != nil {
			return fmt.Errorf("timestamp %q: want YYYY-MM-DD HH:MM:SS", ts)
		}
		dur, err := seconds(h, rec, "duration")
		if err != nil {
			return err
		}
		gpus, err := count(h, rec, "num_gpus")
		if err != nil {
			return err
		}
		vc, _ := field(h, rec, "cluster")
		if vc == "" {
			return fmt.Errorf("cluster: empty; want the virtual cluster's name")
		}
		jobs = append(jobs, Job{Submit: submit.UTC(), Duration: dur, GPUs: gpus, Project: "vc-" + vc, Checkpoint: -1, Source: FormatPhilly, Line: line})
		return nil
	})
	return jobs, err
}

// csvColumns is berth's generic trace format's header, the optional
// columns in brackets.
const csvColumns = "submit,duration,gpus,project[,tier][,checkpoint][,gpu_kind]"

// readCSV reads berth's generic trace format:
//
//	submit,duration,gpus,project[,tier][,checkpoint][,gpu_kind]
//
// submit is an RFC 3339 time or seconds from the trace's start; duration
// and checkpoint are seconds or Go durations (90m); an empty tier or
// checkpoint is left for the mapping to fill. gpu_kind names the GPU kind
// the job runs on (Job.Kind); empty, any whole GPU. Columns come in any
// order, named by the header.
func readCSV(r io.Reader) ([]Job, error) {
	var jobs []Job
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := true
	err := records(r, func(h map[string]int, rec []string, line int) error {
		if first {
			for _, col := range []string{"submit", "duration", "gpus", "project"} {
				if _, ok := h[col]; !ok {
					return fmt.Errorf("header: no %q column; want %s", col, csvColumns)
				}
			}
			first = false
		}
		s, _ := field(h, rec, "submit")
		var submit time.Time
		if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 && !math.IsInf(secs, 0) {
			submit = origin.Add(time.Duration(secs * float64(time.Second)))
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			submit = t.UTC()
		} else {
			return fmt.Errorf("submit %q: want an RFC 3339 time or seconds from the start", s)
		}
		dur, err := seconds(h, rec, "duration")
		if err != nil {
			return err
		}
		gpus, err := count(h, rec, "gpus")
		if err != nil {
			return err
		}
		project, _ := field(h, rec, "project")
		if project == "" {
			return fmt.Errorf("project: empty")
		}
		tier, _ := field(h, rec, "tier")
		cp := time.Duration(-1)
		if v, _ := field(h, rec, "checkpoint"); v != "" {
			if cp, err = seconds(h, rec, "checkpoint"); err != nil {
				return err
			}
		}
		kind, _ := field(h, rec, "gpu_kind")
		jobs = append(jobs, Job{Submit: submit, Duration: dur, GPUs: gpus, Project: project, Tier: tier, Checkpoint: cp, Source: FormatCSV, Kind: kind, Line: line})
		return nil
	})
	return jobs, err
}

// seconds reads a column of seconds (a number) or a Go duration.
func seconds(h map[string]int, rec []string, name string) (time.Duration, error) {
	v, _ := field(h, rec, name)
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%s %q: want seconds (3600) or a duration (1h)", name, v)
}

func count(h map[string]int, rec []string, name string) (int, error) {
	v, _ := field(h, rec, name)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: want a whole number of GPUs, 1 or more", name, v)
	}
	return n, nil
}

// WriteCSV writes jobs in the generic trace format, submit as RFC 3339 and
// durations in seconds: what Read reads back as FormatCSV. The gpu_kind
// column is written when some job names a kind.
func WriteCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	header := []string{"submit", "duration", "gpus", "project", "tier", "checkpoint"}
	kinds := slices.ContainsFunc(jobs, func(j Job) bool { return j.Kind != "" })
	if kinds {
		header = append(header, "gpu_kind")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, j := range jobs {
		cp := ""
		if j.Checkpoint >= 0 {
			cp = strconv.FormatFloat(j.Checkpoint.Seconds(), 'f', -1, 64)
		}
		rec := []string{j.Submit.UTC().Format(time.RFC3339), strconv.FormatFloat(j.Duration.Seconds(), 'f', -1, 64), strconv.Itoa(j.GPUs), j.Project, j.Tier, cp}
		if kinds {
			rec = append(rec, j.Kind)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

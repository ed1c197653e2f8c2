package schema

import "time"

// The raw* types mirror the YAML as written: optional fields are pointers
// so defaults can be told apart from values, and quantities stay text
// until they are parsed strictly.

type rawMeta struct {
	Name        string            `json:"name"`
	Project     string            `json:"project"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type rawTier struct {
	Metadata rawMeta `json:"metadata"`
	Spec     struct {
		Value              int                 `json:"value"`
		Description        string              `json:"description"`
		Preemptible        *bool               `json:"preemptible"`
		CanPreempt         *bool               `json:"canPreempt"`
		BorrowWithinCohort *BorrowWithinCohort `json:"borrowWithinCohort"`
	} `json:"spec"`
}

type rawResources struct {
	GPUs     int      `json:"gpus"`
	GPUModel string   `json:"gpuModel"`
	CPU      quantity `json:"cpu"`
	Memory   quantity `json:"memory"`
	// Workspaces only (the schema keeps them out of a quota).
	ExclusiveCores int      `json:"exclusiveCores"`
	Disk           quantity `json:"disk"`
}

type rawProject struct {
	Metadata rawMeta `json:"metadata"`
	Spec     struct {
		Tier        string        `json:"tier"`
		MaxTier     string        `json:"maxTier"`
		Description string        `json:"description"`
		Members     []string      `json:"members"`
		Quota       *rawResources `json:"quota"`
		BorrowLimit *struct {
			GPUs   *int     `json:"gpus"`
			CPU    quantity `json:"cpu"`
			Memory quantity `json:"memory"`
		} `json:"borrowLimit"`
		FairShare *struct {
			Weight *float64 `json:"weight"`
		} `json:"fairShare"`
		Namespace string     `json:"namespace"`
		Placement *Placement `json:"placement"`
	} `json:"spec"`
}

type rawTopology struct {
	NVLink *Constraint `json:"nvlink"`
	NUMA   *Constraint `json:"numa"`
}

type rawCheckpoint struct {
	Signal      *string   `json:"signal"`
	GracePeriod *quantity `json:"gracePeriod"`
	Interval    *quantity `json:"interval"`
}

type rawWorkspace struct {
	Metadata rawMeta `json:"metadata"`
	Spec     struct {
		Owner            string         `json:"owner"`
		Tier             string         `json:"tier"`
		State            DesiredState   `json:"state"`
		Task             Task           `json:"task"`
		Resources        rawResources   `json:"resources"`
		Topology         *rawTopology   `json:"topology"`
		Replicas         *int           `json:"replicas"`
		Placement        *Placement     `json:"placement"`
		Ports            []Port         `json:"ports"`
		Service          *rawService    `json:"service"`
		Volumes          []VolumeMount  `json:"volumes"`
		Checkpoint       *rawCheckpoint `json:"checkpoint"`
		Preemptible      *bool          `json:"preemptible"`
		RestartOnFailure bool           `json:"restartOnFailure"`
		Restart          *rawRestart    `json:"restart"`
		UnhealthyGPU     string         `json:"unhealthyGPU"`
		ExpectedDuration *quantity      `json:"expectedDuration"`
	} `json:"spec"`
}

type rawRestart struct {
	Attempts *int      `json:"attempts"`
	Delay    *quantity `json:"delay"`
}

type rawService struct {
	Name  string   `json:"name"`
	Port  string   `json:"port"`
	Tags  []string `json:"tags"`
	Check *struct {
		Type     string    `json:"type"`
		Path     string    `json:"path"`
		Interval *quantity `json:"interval"`
		Timeout  *quantity `json:"timeout"`
	} `json:"check"`
}

type rawVolume struct {
	Metadata rawMeta `json:"metadata"`
	Spec     struct {
		Size       quantity `json:"size"`
		Type       string   `json:"type"`
		Source     string   `json:"source"`
		AccessMode string   `json:"accessMode"`
		Projects   []string `json:"projects"`
	} `json:"spec"`
}

type rawPolicy struct {
	Metadata rawMeta `json:"metadata"`
	Spec     struct {
		FairShare *struct {
			HalfLife *quantity `json:"halfLife"`
		} `json:"fairShare"`
		Aging *struct {
			Interval *quantity `json:"interval"`
			Step     *int      `json:"step"`
			MaxBoost *int      `json:"maxBoost"`
			MaxWait  *quantity `json:"maxWait"`
		} `json:"aging"`
		Preemption *struct {
			Enabled    *bool     `json:"enabled"`
			MinRuntime *quantity `json:"minRuntime"`
			MaxVictims *int      `json:"maxVictims"`
		} `json:"preemption"`
		Defaults *struct {
			Topology   *rawTopology   `json:"topology"`
			Checkpoint *rawCheckpoint `json:"checkpoint"`
		} `json:"defaults"`
	} `json:"spec"`
}

// quantity is a scalar kept as text: a YAML number or string.
type quantity struct {
	text string
	set  bool
}

// fieldErrs collects diagnostics at field positions of one document.
type fieldErrs struct {
	d    *doc
	diag []Diagnostic
}

func (f *fieldErrs) cpu(field string, q quantity) int64 {
	if !q.set {
		return 0
	}
	n, err := ParseCPU(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
	}
	return n
}

func (f *fieldErrs) bytes(field string, q quantity) int64 {
	if !q.set {
		return 0
	}
	n, err := ParseBytes(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
	}
	return n
}

func (f *fieldErrs) duration(field string, q *quantity, def time.Duration) time.Duration {
	if q == nil || !q.set {
		return def
	}
	d, err := ParseDuration(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
		return def
	}
	return d
}

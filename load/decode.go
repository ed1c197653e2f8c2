package load

import (
	"time"

	"github.com/berth-dev/berth/schema"
)

// The raw* types mirror the YAML as written: optional fields are pointers
// so defaults can be told apart from values, and quantities stay text
// until they are parsed strictly. The loader fills them from the syntax
// by their JSON names; JSON itself is only the spec cache's file
// (cachefile.go), where omitzero leaves out what is zero and reads back
// as zero.

type rawMeta struct {
	Name        string            `json:"name,omitzero"`
	Project     string            `json:"project,omitzero"`
	Labels      map[string]string `json:"labels,omitzero"`
	Annotations map[string]string `json:"annotations,omitzero"`
}

type rawTier struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Value              int                        `json:"value,omitzero"`
		Description        string                     `json:"description,omitzero"`
		Preemptible        *bool                      `json:"preemptible,omitzero"`
		CanPreempt         *bool                      `json:"canPreempt,omitzero"`
		BorrowWithinCohort *schema.BorrowWithinCohort `json:"borrowWithinCohort,omitzero"`
		MaxRuntime         *quantity                  `json:"maxRuntime,omitzero"`
		Idle               *rawIdle                   `json:"idle,omitzero"`
		Ordering           schema.Ordering            `json:"ordering,omitzero"`
	} `json:"spec,omitzero"`
}

// rawIdle is an idle-GPU rule as written (schema.IdleRule).
type rawIdle struct {
	After  *quantity         `json:"after,omitzero"`
	Below  float64           `json:"below,omitzero"`
	Action schema.IdleAction `json:"action,omitzero"`
}

type rawResources struct {
	GPUs     int      `json:"gpus,omitzero"`
	GPUModel string   `json:"gpuModel,omitzero"`
	CPU      quantity `json:"cpu,omitzero"`
	Memory   quantity `json:"memory,omitzero"`
	// Quotas only (the schema keeps it out of a workspace).
	Kinds map[string]int `json:"kinds,omitzero"`
	// Workspaces only (the schema keeps them out of a quota).
	GPUKind        string   `json:"gpuKind,omitzero"`
	GPUKinds       []string `json:"gpuKinds,omitzero"`
	ExclusiveCores int      `json:"exclusiveCores,omitzero"`
	Disk           quantity `json:"disk,omitzero"`
}

type rawProject struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Tier        string        `json:"tier,omitzero"`
		MaxTier     string        `json:"maxTier,omitzero"`
		Description string        `json:"description,omitzero"`
		Members     []string      `json:"members,omitzero"`
		Quota       *rawResources `json:"quota,omitzero"`
		BorrowLimit *struct {
			GPUs   *int           `json:"gpus,omitzero"`
			CPU    quantity       `json:"cpu,omitzero"`
			Memory quantity       `json:"memory,omitzero"`
			Kinds  map[string]int `json:"kinds,omitzero"`
		} `json:"borrowLimit,omitzero"`
		FairShare *struct {
			Weight *float64 `json:"weight,omitzero"`
		} `json:"fairShare,omitzero"`
		Namespace  string            `json:"namespace,omitzero"`
		Placement  *schema.Placement `json:"placement,omitzero"`
		MaxRuntime *quantity         `json:"maxRuntime,omitzero"`
		Idle       *rawIdle          `json:"idle,omitzero"`
	} `json:"spec,omitzero"`
}

type rawTopology struct {
	NVLink *schema.Constraint `json:"nvlink,omitzero"`
	NUMA   *schema.Constraint `json:"numa,omitzero"`
}

type rawCheckpoint struct {
	Signal      *string   `json:"signal,omitzero"`
	GracePeriod *quantity `json:"gracePeriod,omitzero"`
	Interval    *quantity `json:"interval,omitzero"`
}

type rawWorkspace struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Owner            string               `json:"owner,omitzero"`
		Tier             string               `json:"tier,omitzero"`
		State            schema.DesiredState  `json:"state,omitzero"`
		Task             schema.Task          `json:"task,omitzero"`
		Resources        rawResources         `json:"resources,omitzero"`
		Topology         *rawTopology         `json:"topology,omitzero"`
		Replicas         *int                 `json:"replicas,omitzero"`
		Placement        *schema.Placement    `json:"placement,omitzero"`
		Ports            []schema.Port        `json:"ports,omitzero"`
		Service          *rawService          `json:"service,omitzero"`
		Volumes          []schema.VolumeMount `json:"volumes,omitzero"`
		Checkpoint       *rawCheckpoint       `json:"checkpoint,omitzero"`
		Preemptible      *bool                `json:"preemptible,omitzero"`
		RestartOnFailure bool                 `json:"restartOnFailure,omitzero"`
		Restart          *rawRestart          `json:"restart,omitzero"`
		UnhealthyGPU     string               `json:"unhealthyGPU,omitzero"`
		ExpectedDuration *quantity            `json:"expectedDuration,omitzero"`
		MaxRuntime       *quantity            `json:"maxRuntime,omitzero"`
		Idle             *rawIdle             `json:"idle,omitzero"`
	} `json:"spec,omitzero"`
}

type rawRestart struct {
	Attempts *int      `json:"attempts,omitzero"`
	Delay    *quantity `json:"delay,omitzero"`
}

type rawService struct {
	Name  string   `json:"name,omitzero"`
	Port  string   `json:"port,omitzero"`
	Tags  []string `json:"tags,omitzero"`
	Check *struct {
		Type     string    `json:"type,omitzero"`
		Path     string    `json:"path,omitzero"`
		Interval *quantity `json:"interval,omitzero"`
		Timeout  *quantity `json:"timeout,omitzero"`
	} `json:"check,omitzero"`
}

type rawVolume struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Size       quantity `json:"size,omitzero"`
		Type       string   `json:"type,omitzero"`
		Source     string   `json:"source,omitzero"`
		AccessMode string   `json:"accessMode,omitzero"`
		Projects   []string `json:"projects,omitzero"`
	} `json:"spec,omitzero"`
}

type rawKind struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Match       string  `json:"match,omitzero"`
		Weight      float64 `json:"weight,omitzero"`
		Description string  `json:"description,omitzero"`
	} `json:"spec,omitzero"`
}

type rawNotification struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		Format         string           `json:"format,omitzero"`
		URL            schema.SecretRef `json:"url,omitzero"`
		Secret         schema.SecretRef `json:"secret,omitzero"`
		Projects       []string         `json:"projects,omitzero"`
		Owners         []string         `json:"owners,omitzero"`
		Events         []string         `json:"events,omitzero"`
		SummarizeAbove int              `json:"summarizeAbove,omitzero"`
	} `json:"spec,omitzero"`
}

type rawPolicy struct {
	Metadata rawMeta `json:"metadata,omitzero"`
	Spec     struct {
		FairShare *struct {
			HalfLife *quantity `json:"halfLife,omitzero"`
		} `json:"fairShare,omitzero"`
		Aging *struct {
			Interval *quantity `json:"interval,omitzero"`
			Step     *int      `json:"step,omitzero"`
			MaxBoost *int      `json:"maxBoost,omitzero"`
			MaxWait  *quantity `json:"maxWait,omitzero"`
		} `json:"aging,omitzero"`
		Preemption *struct {
			Enabled    *bool     `json:"enabled,omitzero"`
			MinRuntime *quantity `json:"minRuntime,omitzero"`
			MaxVictims *int      `json:"maxVictims,omitzero"`
		} `json:"preemption,omitzero"`
		Defaults *struct {
			Topology   *rawTopology   `json:"topology,omitzero"`
			Checkpoint *rawCheckpoint `json:"checkpoint,omitzero"`
		} `json:"defaults,omitzero"`
		Idle    *rawIdle `json:"idle,omitzero"`
		Service *struct {
			Steps   *[]float64 `json:"steps,omitzero"`
			Promote *float64   `json:"promote,omitzero"`
		} `json:"service,omitzero"`
	} `json:"spec,omitzero"`
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
	n, err := schema.ParseCPU(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
	}
	return n
}

func (f *fieldErrs) bytes(field string, q quantity) int64 {
	if !q.set {
		return 0
	}
	n, err := schema.ParseBytes(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
	}
	return n
}

func (f *fieldErrs) duration(field string, q *quantity, def time.Duration) time.Duration {
	if q == nil || !q.set {
		return def
	}
	d, err := schema.ParseDuration(q.text)
	if err != nil {
		f.diag = append(f.diag, errorf(f.d.pos(field), "%s: %v", field, err))
		return def
	}
	return d
}

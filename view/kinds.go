package view

import "github.com/berth-dev/berth/drivers"

// KindQuotaStatus is a project's quota account of one GPU kind its quota
// names (quota.kinds): the GPUs of its workspaces that ask for the kind.
type KindQuotaStatus struct {
	Kind      string `json:"kind"`
	QuotaGPUs int    `json:"quotaGPUs"`
	// BorrowLimitGPUs is how many GPUs of the kind it may borrow beyond
	// its quota (borrowLimit.kinds); nil (absent) when unlimited.
	BorrowLimitGPUs *int `json:"borrowLimitGPUs,omitempty"`
	UsedGPUs        int  `json:"usedGPUs"`
	// BorrowedGPUs are the GPUs of the kind it uses beyond its quota.
	BorrowedGPUs int `json:"borrowedGPUs"`
}

// KindCapacity is the cluster's GPUs of one kind (drivers.GPUsByKind).
type KindCapacity = drivers.KindCapacity

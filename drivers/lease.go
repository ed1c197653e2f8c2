package drivers

import "time"

// Lease is the leader lease that replicas of berth sharing one cluster
// hold in turn: only its holder writes to the cluster. It is kept by the
// store with check-and-set (its version); the times in it are the
// holder's, for people to read: replicas never compare clocks.
type Lease struct {
	// Holder names the replica holding it ("host/pid/random"); empty: it
	// was released and any replica may take it at once.
	Holder string `json:"holder"`
	// TTL is how long the lease holds without a renewal.
	TTL time.Duration `json:"ttl"`
	// Term counts the take-overs: each new holder adds one.
	Term uint64 `json:"term"`
	// Renewed is when the holder last renewed it, by its own clock.
	Renewed time.Time `json:"renewed"`
}

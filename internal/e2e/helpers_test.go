package e2e

import (
	"context"
)

var ctx = context.Background()

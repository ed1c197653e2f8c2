package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// statusOf returns the HTTP status and body of an api error, or 0.
func statusOf(err error) (int, string) {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode(), ure.Body()
	}
	var pure *api.UnexpectedResponseError
	if errors.As(err, &pure) && pure.HasStatusCode() {
		return pure.StatusCode(), pure.Body()
	}
	return 0, ""
}

// isNotFound reports a 404 from Nomad.
func isNotFound(err error) bool {
	code, _ := statusOf(err)
	return code == http.StatusNotFound
}

// classOf sorts a Nomad error. Nomad answers job validation failures and
// a stale EnforceIndex alike with HTTP 500 and a text message (recordings
// 34, 36, 59), so the message decides.
func classOf(err error) drivers.Class {
	var cas api.ErrCASConflict
	if errors.As(err, &cas) {
		return drivers.ClassConflict
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return drivers.ClassTransient
	}
	code, body := statusOf(err)
	switch {
	case code == 0:
		return drivers.ClassTransient // no answer: network, TLS, timeout
	case code == http.StatusConflict, code == http.StatusNotFound:
		return drivers.ClassConflict
	case code == http.StatusBadRequest, code == http.StatusMethodNotAllowed:
		return drivers.ClassInvalid
	case code == http.StatusForbidden, code == http.StatusUnauthorized:
		// An ACL problem is the operator's to fix in Nomad, not the
		// workspace's: keep retrying (with backoff) until the token works.
		return drivers.ClassTransient
	case code == http.StatusInternalServerError:
		switch {
		case strings.Contains(body, "Enforcing job modify index"),
			strings.Contains(body, "has non-terminal jobs"),
			strings.Contains(body, "nonexistent namespace"),
			strings.Contains(body, "job already exists"):
			return drivers.ClassConflict
		case strings.Contains(body, "error occurred:"), strings.Contains(body, "errors occurred:"),
			strings.Contains(body, "validation failed"), strings.Contains(body, "must be"):
			return drivers.ClassInvalid
		}
		return drivers.ClassTransient
	}
	return drivers.ClassTransient
}

// wrap classifies err and names the step. The api package's errors carry
// Nomad's message and status, never the token.
func wrap(err error, ref schema.Ref, op string) error {
	if err == nil {
		return nil
	}
	var de *drivers.Error
	if errors.As(err, &de) {
		return err
	}
	if code, _ := statusOf(err); code == http.StatusForbidden || code == http.StatusUnauthorized {
		err = fmt.Errorf("%w\n(Nomad refused berth's token: check that NOMAD_TOKEN is set to a valid ACL token whose policy grants what examples/deploy/berth-reconciler.policy.hcl grants)", err)
	}
	return &drivers.Error{Class: classOf(err), Op: "nomad: " + op, Workspace: ref, Err: err}
}

func errorf(class drivers.Class, ref schema.Ref, op, format string, args ...any) error {
	return drivers.Errorf(class, ref, "nomad: "+op, format, args...)
}

package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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

// classOf sorts a Nomad error by its HTTP status, as Nomad's API
// documents them: 400 (and 405, 413, 422) a request Nomad will never
// accept, 404 and 409 a cluster that changed under berth, everything
// else (5xx, 429, no answer, a request cut by its deadline) worth a
// retry. 403 and 401 are the operator's to fix in Nomad, not the
// workspace's: they are retried (with backoff) until the token works.
//
// The text of an answer never decides: Nomad answers a job that does not
// validate, a stale EnforceIndex and a failed RPC ("1 error occurred:
// rpc error: EOF") alike with HTTP 500 and a message (recordings 34, 36,
// 59), so a 500 is transient here; a register that gets one asks Nomad
// what went wrong (registerFailed).
func classOf(err error) drivers.Class {
	var cas api.ErrCASConflict
	if errors.As(err, &cas) {
		return drivers.ClassConflict
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return drivers.ClassTransient
	}
	code, _ := statusOf(err)
	switch code {
	case http.StatusConflict, http.StatusNotFound:
		return drivers.ClassConflict
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return drivers.ClassInvalid
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

// Package notify tells people what happened: a workspace preempted,
// moved, failed, resumed, overdue past its wait bound, stopped at its
// time limit or for idle GPUs; a revision of the specs applied or
// refused. It consumes what the loop publishes at the end of each cycle
// (view.News: the timeline's events, the revisions, the read model) and
// sends it, routed by the specs' Notification documents, to webhooks
// (JSON signed with HMAC-SHA256) and Slack incoming webhooks, and the
// revision's commit status to GitHub or GitLab.
//
// It never holds the loop up: Notifier.News only hands the cycle over
// (a full hand-over drops it, counted and logged); routing, rendering
// and sending happen on the notifier's own goroutines, over a bounded
// queue, each request with its own timeout, failures retried with
// exponential backoff and jitter a bounded number of times.
//
// It never writes a secret to its logs: a receiver's URL and key are
// read from the environment or a file at each delivery (the spec names
// where, never the value), and the logs name the notifier and the URL's
// host, no more; errors are scrubbed of the URL before they are logged.
//
// Its clock is the one it is given (Config.Clock), so its backoffs are
// stepped in tests.
package notify

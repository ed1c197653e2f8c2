// Package ui is berth's live dashboard: plain HTML, CSS and JavaScript,
// embedded in the binary and served by `berth reconcile` under /. The page
// reads the loop's state from GET /api/v1/events (a WebSocket: the state,
// then deltas) and a workspace's history and explanation from
// GET /api/v1/workspaces/PROJECT/NAME.
//
// It must never hold data of its own (the assets are the same in every
// berth binary, so they are served without a token), need a build step,
// or make the browser fetch anything from another origin: the Content
// Security Policy it sends forbids it.
package ui

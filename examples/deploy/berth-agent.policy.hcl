# berth agent writes dynamic node metadata (POST /v1/client/metadata).
node {
  policy = "write"
}

package plan

// The compact test formats, for the external tests (golden_test.go).
var (
	ParsePlanCluster = parsePlanCluster
	LoadTestSpecs    = loadTestSpecs
)

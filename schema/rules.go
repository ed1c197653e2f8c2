package schema

// checkRules is filled in by the user-rules stage.
func checkRules(rules []sourceFile, docs []*doc) []Diagnostic { return nil }

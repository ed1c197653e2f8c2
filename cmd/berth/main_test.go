package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"berth": func() { os.Exit(Main()) },
	})
}

// TestScripts runs cmd/berth/testdata/script/*.txtar in-process.
// BERTH_UPDATE=1 rewrites the expected output in the scripts.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("BERTH_UPDATE") != "",
		Cmds:          map[string]func(ts *testscript.TestScript, neg bool, args []string){"fakenomad": fakeNomad},
		Setup: func(env *testscript.Env) error {
			env.Setenv("GITHUB_STEP_SUMMARY", "")
			return nil
		},
	})
}

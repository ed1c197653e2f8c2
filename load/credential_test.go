package load

import "testing"

// TestCredentialLike: the well-known token formats, a long random string
// and a secret's name are credentials; paths, URLs, model names, hashes,
// short values and settings are not.
func TestCredentialLike(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        bool
	}{
		{"HF_TOKEN", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", true},
		{"GH", "ghp_1234567890abcdefghijABCDEFGHIJ123456", true},
		{"GITHUB", "github_pat_11ABCDEFG0123456789_abcdefghij", true},
		{"AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", true},
		{"OPENAI", "sk-proj-Abc123Def456Ghi789Jkl012", true},
		{"SLACK", "xoxb-123456789012-abcdefABCDEF", true},
		{"X", "Zx8Qp2Lk9Vb4Nm7Rt1Yw6Uh3Jd5Sa0Gf", true},
		{"WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567", true},
		{"AUTH", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", true},
		{"HF_HOME", "/data/cache/huggingface", false},
		{"MODEL", "meta-llama/Meta-Llama-3.1-70B-Instruct", false},
		{"DATA_URL", "https://example.com/datasets/imagenet-2012/train", false},
		{"CHECKPOINT_SHA", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", false},
		{"GIT_COMMIT", "5fd59ab655e908f6419f2d128820789484156f25", false},
		{"TOKENIZERS_PARALLELISM", "false", false},
		{"API_KEY_FILE", "/secrets/api-key", false},
		{"SKLEARN", "sk-learn", false},
		{"NCCL_DEBUG", "INFO", false},
		{"CUDA_VISIBLE_DEVICES", "0,1,2,3", false},
		{"PASSWORD", "changeme", false},
	} {
		what, got := credentialLike(c.name, c.value)
		if got != c.want {
			t.Errorf("%s=%s: credential %v (%q), want %v", c.name, c.value, got, what, c.want)
		}
	}
}

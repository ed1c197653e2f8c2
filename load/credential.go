package load

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// credentialPrefixes are the prefixes of well-known credential formats,
// each with what it is called in a warning.
var credentialPrefixes = []struct{ prefix, what string }{
	{"hf_", "a Hugging Face token"},
	{"ghp_", "a GitHub token"},
	{"gho_", "a GitHub token"},
	{"ghu_", "a GitHub token"},
	{"ghs_", "a GitHub token"},
	{"ghr_", "a GitHub token"},
	{"github_pat_", "a GitHub token"},
	{"glpat-", "a GitLab token"},
	{"AKIA", "an AWS access key"},
	{"ASIA", "an AWS access key"},
	{"sk-", "an API secret key"},
	{"xoxb-", "a Slack token"},
	{"xoxp-", "a Slack token"},
	{"xoxa-", "a Slack token"},
	{"xoxr-", "a Slack token"},
	{"xoxs-", "a Slack token"},
}

// tokenChars is what a token's characters are: letters, digits, and
// '_', '-', '+' and '='. A value with a space, a '/' or a '.' is a
// sentence, a path, a URL, a model name or a version, not a bare token
// (a JSON Web Token, three such parts joined by dots, is looked for on
// its own).
var tokenChars = regexp.MustCompile(`^[A-Za-z0-9_\-+=]+$`)

// secretName is an env name that says its value is a secret.
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)`)

// credentialLike reports whether env name=value looks like a credential
// written in the spec, and what it looks like (never the value): a
// well-known token prefix, a long random-looking string, or a value of
// some length under a name such as WANDB_API_KEY that is not a path or a
// reference to somewhere else.
func credentialLike(name, value string) (what string, ok bool) {
	if parts := strings.Split(value, "."); len(parts) == 3 && strings.HasPrefix(value, "eyJ") && len(value) >= 32 &&
		tokenChars.MatchString(parts[0]) && tokenChars.MatchString(parts[1]) && tokenChars.MatchString(parts[2]) {
		return `a JSON Web Token ("eyJ…")`, true
	}
	if !tokenChars.MatchString(value) {
		return "", false
	}
	for _, c := range credentialPrefixes {
		if rest, ok := strings.CutPrefix(value, c.prefix); ok && len(rest) >= 12 {
			return c.what + ` ("` + c.prefix + `…")`, true
		}
	}
	hasLetter := strings.ContainsFunc(value, func(r rune) bool { return 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' })
	hasDigit := strings.ContainsFunc(value, func(r rune) bool { return '0' <= r && r <= '9' })
	switch {
	case len(value) >= 32 && hasLetter && hasDigit && entropy(value) >= 4.3:
		return "a random string of " + strconv.Itoa(len(value)) + " characters", true
	case secretName.MatchString(name) && len(value) >= 16 && hasLetter && hasDigit:
		return "a secret (its name says so)", true
	}
	return "", false
}

// entropy is s's Shannon entropy in bits per character.
func entropy(s string) float64 {
	var count [256]int
	for i := 0; i < len(s); i++ {
		count[s[i]]++
	}
	h := 0.0
	for _, c := range count {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

package planrun

import (
	"path/filepath"

	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/planload"
)

// UpstreamGiven is an upstream the operator gives besides the plan
// (planlock proxy's -- COMMAND, --upstream-url and --env).
type UpstreamGiven struct {
	Command []string
	URL     string
	// Env names more variables passed to a stdio upstream.
	Env []string
}

// Upstream is the loaded plan's upstream: its signed upstream block (a
// relative program taken from the plan file's directory) or the one given,
// exactly one of them. lookupEnv gives the variables passed to a stdio
// upstream. Errors wrap ErrUsage.
func Upstream(loaded *planload.Loaded, given UpstreamGiven, lookupEnv func(string) (string, bool)) (proxy.UpstreamConfig, error) {
	var up proxy.UpstreamConfig
	var planCmd, names []string
	var planURL string
	if u := loaded.Plan.Upstream; u != nil {
		planCmd, planURL, names = u.CommandIn(filepath.Dir(loaded.File)), u.URL, u.Env
	}
	sources := 0
	for _, g := range []bool{len(given.Command) > 0, given.URL != "", len(planCmd) > 0, planURL != ""} {
		if g {
			sources++
		}
	}
	switch {
	case sources == 0:
		return up, usagef("no upstream: give -- COMMAND ARGS..., --upstream-url URL, or an upstream block in the plan")
	case sources > 1:
		return up, usagef("the upstream is given more than once (plan upstream block, -- COMMAND, --upstream-url): give exactly one; when the plan has an upstream block, the signed plan decides")
	}
	up.URL = given.URL + planURL
	up.Command = planCmd
	if len(given.Command) > 0 {
		up.Command = given.Command
	}
	if len(up.Command) > 0 {
		env, err := proxy.UpstreamEnv(append(append([]string{}, names...), given.Env...), lookupEnv)
		if err != nil {
			return up, usagef("%v", err)
		}
		up.Env = env
	} else if len(given.Env) > 0 {
		return up, usagef("--env applies to a stdio upstream only")
	}
	return up, nil
}

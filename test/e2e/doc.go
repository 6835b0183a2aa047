// Package e2e holds planlock's end-to-end tests: the ones that run built
// binaries (the planlock CLI, the example and test upstreams, the GitHub
// stand-in, the bare relay of bench/passthrough) and the real peers pinned in
// test/peers (the TypeScript SDK agent, the reference servers, the Inspector,
// the conformance suite, Claude Code). They need the e2e build tag:
//
//	go test -tags e2e ./test/e2e
//
// so that `go test ./...` stays a fast unit run. TestMain builds each command
// once per run into a temporary directory (without -race: the abuse tests
// bound the proxy's memory, which the race detector multiplies). The tests
// drive the commands from the outside, as a user, an agent or CI does.
package e2e

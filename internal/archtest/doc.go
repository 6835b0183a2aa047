// Package archtest holds the tests that keep the code's layout honest: the
// dependency edges the design promises (the relay does not depend on Git,
// GitHub or sigstore; the durable state does not depend on the plan
// language), the public packages' exported API (pinned in testdata/api.txt,
// none of it needing an internal type) and docs/architecture.md naming only
// packages that exist.
package archtest

// Package testkit holds, in its subpackages, planlock's test doubles and
// harnesses: faithful fakes of services that cannot run in tests, the fake
// MCP server, and the harnesses that start real peers and PostgreSQL. No
// product package imports them (internal/archtest).
package testkit

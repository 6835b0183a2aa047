// Package fuzz holds the fuzz targets of the proxy's client input (JSON-RPC
// over stdio, through the message size limiter). They live apart from the
// proxy's own tests so that each fuzz worker starts at once instead of
// building the test binaries those tests run.
package fuzz

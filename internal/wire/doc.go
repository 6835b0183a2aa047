// Package wire is the JSON the relay reads and writes without encoding/json
// on the paths every call takes: a JSON-RPC message's envelope (one
// validating scan that slices out the routed members), a call's arguments
// read one way only (the strict decoder the gate's input comes from), an
// upstream's tool result relayed as it was written (raw content items, the
// result type the gate relays), the ids a fast lane may echo, and the
// request line and tools/call params sent upstream. Each reading is either
// exactly encoding/json's or refused, which the fuzz targets check against
// encoding/json.
package wire

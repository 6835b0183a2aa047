//go:build race

package peers

// raceEnabled: this binary was built with -race (see BuildCommands).
const raceEnabled = true

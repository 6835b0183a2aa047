# Resources and prompts of the MCP reference server "everything": the agent
# may read two documents and one family of templated resources, and get one
# prompt with a bounded argument. No tool is allowed.
plan "everything-docs" {
  goal  = "Summarise the architecture document of the demo server"
  order = "any"

  upstream {
    command = ["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"]
  }

  resource "architecture" {
    uri       = "demo://resource/static/document/architecture.md"
    max_reads = 5
  }

  resource "documents" {
    uri_pattern = "demo://resource/static/document/[a-z-]+\\.md"
    max_reads   = 10
  }

  resource "dynamic" {
    uri_template = "demo://resource/dynamic/text/{resourceId}"
    max_reads    = 3
  }

  prompt "simple-prompt" {
    max_calls = 2
  }

  prompt "args-prompt" {
    arg "city" { enum = ["Paris", "Berlin"] }
    arg "state" {
      max_length = 40
      optional   = true
    }
    max_calls = 3
  }
}

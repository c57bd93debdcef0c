"""Live mode: 23 small HTTP API services on loopback, their registry, an HTTP environment and
eight sequential tasks over them (docs/BENCHMARK.md: Live APIs). Import the submodules; this
package imports nothing heavy on its own."""

// Package report holds the Report model (findings, devices, verdict) and
// its renderers: text, JSON and Markdown. The report is data; rendering is
// separate, and renderers never decide anything.
package report

"""The admission-policy floor (issue 40): guardhook's lookup-free rules as ValidatingAdmissionPolicies,
which the API server evaluates in process, so they hold while guardhook is down.

- `guardhook.floor.cel`: CEL text helpers (string and list literals, exemption conditions).
- `guardhook.floor.rules`: the floor's rules, one builder per exported policy.
- `guardhook.floor.export`: the ValidatingAdmissionPolicy and Binding objects from a Config, and what
  was left out and why (`guardhook export admission-policies`).
- `guardhook.floor.cost`: an estimate of each expression's CEL cost.
- `guardhook.floor.evaluate`: evaluates exported policies offline with cel-python, as the API server
  would (tests, and the layer's self-check).
"""

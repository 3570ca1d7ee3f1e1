// The WIT's type-only interfaces (`types`, `tool-types`, `guard-types`): nothing to call.
export {};

// The one module for capabilities and effective permission (STYLE.md principle 5): every route and tool asks
// here, none re-implements it.
export * from './catalogue.js';
export * from './features.js';
export * from './scope.js';
export * from './grant.js';
export * from './effective.js';
export * from './narrowing.js';

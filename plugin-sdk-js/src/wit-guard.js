// The `guard` world's imports (wit/guard.wit): only the shared ones. A guard has no `http`: what
// it is shown of a request never leaves the gateway.
import './wit.js';

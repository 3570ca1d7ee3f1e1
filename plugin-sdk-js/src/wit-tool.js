// The `tool` world's imports (wit/tool.wit): only the shared ones.
import './wit.js';

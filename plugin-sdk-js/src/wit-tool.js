// The `tool` world's imports (wit/tool.wit): the shared ones and `http`, a tool's way out to the
// server's `allowed_hosts`.
import * as http from 'gateway:provider/http@0.2.0';
import { installHost } from './host.js';
import './wit.js';

installHost({ http });

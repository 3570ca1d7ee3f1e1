// The `provider` world's imports (wit/provider.wit): the shared ones, `http` and `sink`, which
// streams a completion's pieces to the caller.
import * as http from 'gateway:provider/http@0.2.0';
import * as sink from 'gateway:provider/sink@0.2.0';
import { installHost } from './host.js';
import './wit.js';

installHost({ http, sink });

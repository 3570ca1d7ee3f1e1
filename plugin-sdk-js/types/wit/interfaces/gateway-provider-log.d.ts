declare module 'gateway:provider/log@0.2.0' {
  export function log(level: Level, message: string): void;
  /**
   * Whether a line at `level` would be kept, so a plugin can skip building
   * one that would be dropped.
   */
  export function enabled(level: Level): boolean;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}

"""Gemini (Gemini API and Vertex AI) through google-genai: the online backend and Batch Mode."""

"""scripting"""
